"""Pure builders of what the loopback Slack emulator delivers to a bot, shaped like real Slack."""

from __future__ import annotations

import time
import uuid
from typing import Any

from bot.testing.slack_model import JSON, Identity


def new_id(prefix: str, length: int = 10) -> str:
    return prefix + uuid.uuid4().hex[:length].upper()


def trigger_id() -> str:
    return f"{int(time.time())}.{uuid.uuid4().int % 10**12}.{uuid.uuid4().hex}"


def event_callback(ident: Identity, event: JSON, event_id: str) -> JSON:
    """The Events API body (`type: event_callback`) wrapping one event."""
    return {
        "token": "emulated-verification-token",
        "team_id": ident.team_id,
        "context_team_id": ident.team_id,
        "api_app_id": ident.app_id,
        "event": event,
        "type": "event_callback",
        "event_id": event_id,
        "event_time": int(time.time()),
        "authorizations": [
            {
                "enterprise_id": None,
                "team_id": ident.team_id,
                "user_id": ident.bot_user_id,
                "is_bot": True,
                "is_enterprise_install": False,
            }
        ],
        "is_ext_shared_channel": False,
        "event_context": "4-" + uuid.uuid4().hex,
    }


def message_event(ident: Identity, channel: str, stored: JSON, channel_type: str) -> JSON:
    """The `message` event for a stored user message."""
    event = {key: value for key, value in stored.items() if key not in ("reply_count",)}
    return {**event, "channel": channel, "event_ts": stored["ts"], "channel_type": channel_type}


def mention_event(message_event: JSON) -> JSON:
    """The `app_mention` event Slack sends next to the `message` event of a mention."""
    keep = ("user", "text", "ts", "thread_ts", "channel", "event_ts", "team", "client_msg_id",
            "files", "attachments")  # fmt: skip
    return {"type": "app_mention", **{k: message_event[k] for k in keep if k in message_event}}


def changed_event(channel: str, before: JSON, after: JSON, channel_type: str) -> JSON:
    ts = after["edited"]["ts"]
    return {
        "type": "message",
        "subtype": "message_changed",
        "channel": channel,
        "hidden": True,
        "message": after,
        "previous_message": before,
        "ts": ts,
        "event_ts": ts,
        "channel_type": channel_type,
    }


def deleted_event(channel: str, before: JSON, deletion_ts: str, channel_type: str) -> JSON:
    return {
        "type": "message",
        "subtype": "message_deleted",
        "channel": channel,
        "hidden": True,
        "deleted_ts": before["ts"],
        "previous_message": before,
        "ts": deletion_ts,
        "event_ts": deletion_ts,
        "channel_type": channel_type,
    }


def slash_fields(
    ident: Identity, command: str, text: str, user: str, channel: str, response_url: str
) -> dict[str, str]:
    """The form fields of a slash command request."""
    return {
        "token": "emulated-verification-token",
        "team_id": ident.team_id,
        "team_domain": ident.team_domain,
        "channel_id": channel,
        "channel_name": channel.lower(),
        "user_id": user,
        "user_name": user.lower(),
        "command": command,
        "text": text,
        "api_app_id": ident.app_id,
        "is_enterprise_install": "false",
        "response_url": response_url,
        "trigger_id": trigger_id(),
    }


def _block_id(message: JSON | None, action_id: str) -> str:
    for block in (message or {}).get("blocks", []):
        elements = [*block.get("elements", []), block.get("accessory") or {}]
        if any(isinstance(e, dict) and e.get("action_id") == action_id for e in elements):
            return str(block.get("block_id", "b1"))
    return "b1"


def block_actions(
    ident: Identity,
    *,
    user: str,
    channel: str,
    message_ts: str,
    message: JSON | None,
    action_id: str,
    value: str,
    thread_ts: str | None,
    response_url: str,
    state: JSON | None = None,
) -> JSON:
    """An interactive `block_actions` payload for a button click on a message; ``state``:
    what its menus show picked (block id -> action id -> value)."""
    container: dict[str, Any] = {
        "type": "message",
        "message_ts": message_ts,
        "channel_id": channel,
        "is_ephemeral": False,
    }
    if thread_ts:
        container["thread_ts"] = thread_ts
    return {
        "type": "block_actions",
        "user": {
            "id": user,
            "username": user.lower(),
            "name": user.lower(),
            "team_id": ident.team_id,
        },
        "api_app_id": ident.app_id,
        "token": "emulated-verification-token",
        "container": container,
        "trigger_id": trigger_id(),
        "team": {"id": ident.team_id, "domain": ident.team_domain},
        "enterprise": None,
        "is_enterprise_install": False,
        "channel": {"id": channel, "name": channel.lower()},
        "message": message or {"type": "message", "ts": message_ts},
        "state": {"values": state or {}},
        "response_url": response_url,
        "actions": [
            {
                "type": "button",
                "action_id": action_id,
                "block_id": _block_id(message, action_id),
                "value": value,
                "text": {"type": "plain_text", "text": value},
                "action_ts": f"{time.time():.6f}",
            }
        ],
    }


def assistant_thread_event(
    ident: Identity, kind: str, user: str, channel: str, thread_ts: str, context: JSON | None
) -> JSON:
    """`assistant_thread_started` / `assistant_thread_context_changed`; `context` (the channel
    the user is viewing) is completed with this team and no enterprise."""
    full = {"channel_id": None, "team_id": ident.team_id, "enterprise_id": None, **(context or {})}
    return {
        "type": kind,
        "assistant_thread": {
            "user_id": user,
            "context": full,
            "channel_id": channel,
            "thread_ts": thread_ts,
        },
        "event_ts": f"{time.time():.6f}",
    }


def agent_session_stopped_event(
    user: str, channel: str, thread_ts: str, streaming_message_ts: list[str]
) -> JSON:
    """`agent_session_stopped`: `user` pressed Stop on the session of `channel`/`thread_ts`;
    `streaming_message_ts` are the app's streams Slack stopped (empty when none was live)."""
    return {
        "type": "agent_session_stopped",
        "channel": channel,
        "thread_ts": thread_ts,
        "user": user,
        "streaming_message_ts": streaming_message_ts,
        "event_ts": f"{time.time():.6f}",
    }


def app_home_opened_event(user: str, channel: str, tab: str, view: JSON | None) -> JSON:
    """`app_home_opened`: `view` is the Home view published for the user, if any."""
    event: JSON = {"type": "app_home_opened", "user": user, "channel": channel, "tab": tab}
    if view is not None:
        event["view"] = view
    event["event_ts"] = f"{time.time():.6f}"
    return event


def message_action(
    ident: Identity,
    *,
    user: str,
    channel: str,
    message: JSON,
    callback_id: str,
    response_url: str,
) -> JSON:
    """A message shortcut (`type: message_action`) used on a stored message."""
    return {
        "type": "message_action",
        "token": "emulated-verification-token",
        "action_ts": f"{time.time():.6f}",
        "callback_id": callback_id,
        "trigger_id": trigger_id(),
        "team": {"id": ident.team_id, "domain": ident.team_domain},
        "user": {
            "id": user,
            "username": user.lower(),
            "name": user.lower(),
            "team_id": ident.team_id,
        },
        "channel": {"id": channel, "name": channel.lower()},
        "is_enterprise_install": False,
        "enterprise": None,
        "message_ts": message["ts"],
        "message": message,
        "response_url": response_url,
    }


def envelope(kind: str, payload: JSON, *, retry_attempt: int, retry_reason: str) -> JSON:
    """A Socket Mode envelope."""
    return {
        "envelope_id": str(uuid.uuid4()),
        "type": kind,
        "payload": payload,
        "accepts_response_payload": kind == "slash_commands",
        "retry_attempt": retry_attempt,
        "retry_reason": retry_reason,
    }
