"""Web API methods of the loopback Slack emulator, over a `MessageStore` (no I/O)."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

from bot.testing.slack_agent_api import AgentSurfaces
from bot.testing.slack_model import JSON, ApiError, Identity, MessageStore, channel_type_of

Handler = Callable[[JSON], JSON]


def _need(params: JSON, name: str, error: str) -> str:
    value = params.get(name)
    if not isinstance(value, str) or not value:
        raise ApiError(error)
    return value


def _page(items: list[JSON], params: JSON, default_limit: int) -> JSON:
    try:
        limit = int(params.get("limit") or default_limit)
        start = int(params.get("cursor") or 0)
    except ValueError as exc:
        raise ApiError("invalid_cursor") from exc
    end = start + max(1, limit)
    more = end < len(items)
    return {
        "messages": items[start:end],
        "has_more": more,
        "response_metadata": {"next_cursor": str(end) if more else ""},
    }


class WebApi:
    """Answers `/api/<method>` calls; raises `ApiError` for Slack errors."""

    def __init__(
        self,
        store: MessageStore,
        identity: Identity,
        users: dict[str, JSON],
        issue_socket_url: Callable[[], str],
        upload_url: Callable[[str], str],
    ) -> None:
        self.store = store
        self.identity = identity
        self.users = users
        self._issue_socket_url = issue_socket_url
        self._upload_url = upload_url
        self.agent = AgentSurfaces(store, identity, self.bot_message)
        self.methods: dict[str, Handler] = {
            **self.agent.methods,
            "auth.test": self.auth_test,
            "apps.connections.open": lambda _: {"url": self._issue_socket_url()},
            "chat.postMessage": self.post_message,
            "chat.update": self.update,
            "chat.delete": self.delete,
            "chat.postEphemeral": self.post_ephemeral,
            "chat.getPermalink": self.permalink,
            "reactions.add": lambda p: self.react(p, add=True),
            "reactions.remove": lambda p: self.react(p, add=False),
            "conversations.replies": self.replies,
            "conversations.history": self.history,
            "conversations.info": self.conversation_info,
            "users.info": self.user_info,
            "users.conversations": self.user_conversations,
            "files.getUploadURLExternal": self.upload_url,
            "files.completeUploadExternal": self.complete_upload,
        }

    def handle(self, method: str, params: JSON, token: str | None) -> JSON:
        handler = self.methods.get(method)
        if handler is None:
            raise ApiError("unknown_method")
        self._check_token(method, token)
        return {"ok": True, **handler(params)}

    def _check_token(self, method: str, token: str | None) -> None:
        ident = self.identity
        if not token:
            raise ApiError("not_authed")
        if method == "apps.connections.open":
            if token != ident.app_token:
                raise ApiError(
                    "invalid_auth" if token.startswith("xapp-") else "not_allowed_token_type"
                )
        elif token == ident.app_token:
            raise ApiError("not_allowed_token_type")
        elif token != ident.bot_token:
            raise ApiError("invalid_auth")

    # ------------------------------------------------------------------ methods

    def auth_test(self, _: JSON) -> JSON:
        ident = self.identity
        return {
            "url": f"https://{ident.team_domain}.slack.com/",
            "team": ident.team_name,
            "user": ident.bot_name,
            "team_id": ident.team_id,
            "user_id": ident.bot_user_id,
            "bot_id": ident.bot_id,
            "app_id": ident.app_id,
            "is_enterprise_install": False,
        }

    def bot_message(self, params: JSON) -> JSON:
        ident = self.identity
        message: JSON = {
            "type": "message",
            "text": params.get("text") or "",
            "user": ident.bot_user_id,
            "bot_id": ident.bot_id,
            "app_id": ident.app_id,
            "team": ident.team_id,
            "bot_profile": {"id": ident.bot_id, "name": ident.bot_name, "app_id": ident.app_id},
        }
        for key in ("blocks", "attachments", "metadata"):
            if params.get(key):
                message[key] = params[key]
        if params.get("thread_ts"):
            message["thread_ts"] = str(params["thread_ts"])
        return message

    def post_message(self, params: JSON) -> JSON:
        channel = _need(params, "channel", "channel_not_found")
        if not (params.get("text") or params.get("blocks") or params.get("attachments")):
            raise ApiError("no_text")
        stored = self.store.add(channel, self.bot_message(params))
        self.agent.replied(channel, stored.get("thread_ts"))
        return {"channel": channel, "ts": stored["ts"], "message": copy.deepcopy(stored)}

    def _own(self, params: JSON, error: str) -> tuple[str, JSON]:
        channel = _need(params, "channel", "channel_not_found")
        message = self.store.get(channel, _need(params, "ts", "message_not_found"))
        if message.get("bot_id") != self.identity.bot_id:
            raise ApiError(error)
        return channel, message

    def update(self, params: JSON) -> JSON:
        channel, message = self._own(params, "cant_update_message")
        for key in ("text", "blocks", "attachments", "metadata"):
            if key in params:
                message[key] = params[key]
        message["edited"] = {"user": self.identity.bot_user_id, "ts": self.store.next_ts()}
        ts, text = message["ts"], message.get("text", "")
        return {"channel": channel, "ts": ts, "text": text, "message": copy.deepcopy(message)}

    def delete(self, params: JSON) -> JSON:
        channel, message = self._own(params, "cant_delete_message")
        ts = message["ts"]
        self.store.delete(channel, ts)
        return {"channel": channel, "ts": ts}

    def post_ephemeral(self, params: JSON) -> JSON:
        channel = _need(params, "channel", "channel_not_found")
        user = _need(params, "user", "user_not_found")
        if not (params.get("text") or params.get("blocks") or params.get("attachments")):
            raise ApiError("no_text")
        message_ts = self.store.next_ts()
        entry = {**self.bot_message(params), "ts": message_ts, "channel": channel, "to": user}
        self.store.ephemeral.append({**entry, "via": "chat.postEphemeral"})
        return {"message_ts": message_ts}

    def permalink(self, params: JSON) -> JSON:
        channel = _need(params, "channel", "channel_not_found")
        message = self.store.get(channel, _need(params, "message_ts", "message_not_found"))
        ts, thread_ts = message["ts"], message.get("thread_ts")
        domain = self.identity.team_domain
        link = f"https://{domain}.slack.com/archives/{channel}/p{ts.replace('.', '')}"
        if thread_ts and thread_ts != ts:  # a reply's link opens its thread, as Slack's do
            link += f"?thread_ts={thread_ts}&cid={channel}"
        return {"channel": channel, "permalink": link}

    def react(self, params: JSON, *, add: bool) -> JSON:
        channel = _need(params, "channel", "channel_not_found")
        ts = _need(params, "timestamp", "message_not_found")
        name = _need(params, "name", "invalid_name").strip(":")
        self.store.react(channel, ts, name, self.identity.bot_user_id, add=add)
        return {}

    def replies(self, params: JSON) -> JSON:
        channel = _need(params, "channel", "channel_not_found")
        messages = self.store.thread(channel, _need(params, "ts", "thread_not_found"))
        if not messages:
            raise ApiError("thread_not_found")
        return _page(messages, params, 1000)

    def history(self, params: JSON) -> JSON:
        channel = _need(params, "channel", "channel_not_found")
        return _page(self.store.history(channel), params, 100)

    def conversation_info(self, params: JSON) -> JSON:
        channel = _need(params, "channel", "channel_not_found")
        kind = self.store.channel_types.get(channel) or channel_type_of(channel)
        info: dict[str, Any] = {
            "id": channel,
            "name": channel.lower(),
            "is_im": kind == "im",
            "is_mpim": kind == "mpim",
            "is_channel": kind == "channel",
            "is_group": kind == "group",
            "is_private": kind in ("im", "group", "mpim"),
            "is_member": True,
            "context_team_id": self.identity.team_id,
        }
        return {"channel": info}

    def user_conversations(self, params: JSON) -> JSON:
        """The channels a user is in, a page at a time (``limit``, ``cursor``)."""
        user = _need(params, "user", "user_not_found")
        limit = int(params.get("limit") or 100)
        start = int(params.get("cursor") or 0)
        found = self.store.channels_of(user)
        page = [{"id": c, "name": c.lower()} for c in found[start : start + limit]]
        more = start + limit < len(found)
        return {
            "channels": page,
            "response_metadata": {"next_cursor": str(start + limit) if more else ""},
        }

    def upload_url(self, params: JSON) -> JSON:
        filename = _need(params, "filename", "invalid_arguments")
        try:
            length = int(params.get("length") or "")
        except ValueError as exc:
            raise ApiError("invalid_arguments") from exc
        file_id = f"F{len(self.store.files) + 1:08d}"
        self.store.files[file_id] = {"id": file_id, "name": filename, "length": length}
        return {"upload_url": self._upload_url(file_id), "file_id": file_id}

    def complete_upload(self, params: JSON) -> JSON:
        """Shares uploaded files in a channel (or a thread of it) as one message."""
        items = params.get("files")
        if not isinstance(items, list) or not items:
            raise ApiError("invalid_arguments")
        shared: list[JSON] = []
        for item in items:
            file = self.store.files.get(str(item.get("id"))) if isinstance(item, dict) else None
            if file is None or "content" not in file:
                raise ApiError("file_not_found")
            file["title"] = item.get("title") or file["name"]
            shared.append({k: v for k, v in file.items() if k != "content"})
        channel = params.get("channel_id")
        if isinstance(channel, str) and channel:
            message = self.bot_message({**params, "text": params.get("initial_comment") or ""})
            message.update(subtype="file_share", upload=True, files=copy.deepcopy(shared))
            self.store.add(channel, message)
        return {"files": shared}

    def user_info(self, params: JSON) -> JSON:
        user = self.users.get(_need(params, "user", "user_not_found"))
        if user is None:
            raise ApiError("user_not_found")
        return {"user": copy.deepcopy(user)}


def user_record(
    user_id: str, team_id: str, name: str | None = None, *, is_bot: bool = False
) -> JSON:
    """A `users.info` user object."""
    name = name or user_id.lower()
    return {
        "id": user_id,
        "team_id": team_id,
        "name": name,
        "real_name": name,
        "is_bot": is_bot,
        "deleted": False,
        "tz": "UTC",
        "profile": {"display_name": name, "real_name": name},
    }
