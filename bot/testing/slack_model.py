"""Records, message store and transcript rendering of the loopback Slack emulator.

Pure data and logic, no I/O: the server in `bot.testing.slack_emulator` drives it.
"""

from __future__ import annotations

import copy
import hashlib
import hmac
import json
import re
from dataclasses import dataclass, field
from typing import Any

JSON = dict[str, Any]


class ApiError(Exception):
    """A Web API error, answered as HTTP 200 `{"ok": false, "error": ...}` (or with `status`,
    e.g. 429 for a rate limit, which gets a Retry-After of `retry_after` seconds)."""

    def __init__(
        self, error: str, *, status: int = 200, retry_after: int = 1, **extra: Any
    ) -> None:
        super().__init__(error)
        self.error = error
        self.status = status
        self.retry_after = retry_after
        self.extra = extra


@dataclass(frozen=True)
class ApiCall:
    """One recorded Web API call (or a POST to a `response_url`, method "response_url")."""

    method: str
    params: JSON
    time: float
    status: int
    response: JSON

    @property
    def ok(self) -> bool:
        return bool(self.response.get("ok"))


@dataclass
class DeliveredEvent:
    """One delivery to the bot: an Events API event, a slash command or an interactive payload.

    `payload` is what the bot received (the event_callback body, the command fields, or the
    interactive payload). HTTP mode fills `status`/`body`; Socket Mode fills `envelope_id`/`ack`.
    """

    kind: str
    payload: JSON
    event_id: str | None = None
    retry_num: int = 0
    envelope_id: str | None = None
    status: int | None = None
    body: str | None = None
    ack: JSON | None = None
    mention: DeliveredEvent | None = None

    @property
    def event(self) -> JSON:
        inner = self.payload.get("event")
        return inner if isinstance(inner, dict) else {}

    @property
    def acked(self) -> bool:
        return self.ack is not None or (self.status is not None and 200 <= self.status < 300)

    @property
    def response_payload(self) -> Any:
        """The bot's answer: the Socket Mode ack payload, or the HTTP body (JSON if it parses,
        else `{"text": body}` as Slack reads a plain-text answer)."""
        if self.ack is not None:
            return self.ack.get("payload")
        if not self.body:
            return None
        try:
            return json.loads(self.body)
        except ValueError:
            return {"text": self.body}


@dataclass
class Identity:
    bot_token: str
    app_token: str
    signing_secret: str
    bot_user_id: str
    bot_id: str
    team_id: str
    app_id: str
    team_name: str = "Emulated"
    team_domain: str = "emulated"
    bot_name: str = "harness"


def sign(secret: str, timestamp: str, body: bytes) -> str:
    """Slack's request signature: `v0=` + hex HMAC-SHA256 of `v0:{timestamp}:{body}`."""
    base = b"v0:" + timestamp.encode() + b":" + body
    return "v0=" + hmac.new(secret.encode(), base, hashlib.sha256).hexdigest()


def ts_key(ts: str) -> tuple[int, int]:
    whole, _, frac = ts.partition(".")
    return int(whole or 0), int((frac + "000000")[:6] or 0)


def channel_type_of(channel: str) -> str:
    return {"D": "im", "G": "group"}.get(channel[:1], "channel")


@dataclass
class MessageStore:
    """Messages per channel (ordered by ts), reactions inside messages, ephemeral messages."""

    base_ts: int = 1_700_000_000
    channels: dict[str, list[JSON]] = field(default_factory=dict)
    channel_types: dict[str, str] = field(default_factory=dict)
    ephemeral: list[JSON] = field(default_factory=list)
    # Uploaded files by id: name, length, title, and the uploaded bytes as `content`.
    files: dict[str, JSON] = field(default_factory=dict)
    # Who is in which channel besides those who posted there (posting needs membership).
    members: dict[str, set[str]] = field(default_factory=dict)
    _micros: int = 0

    def channels_of(self, user: str) -> list[str]:
        """The channels (not DMs) ``user`` is a member of: joined, or posted in."""
        found = {c for c, users in self.members.items() if user in users}
        found |= {c for c, ms in self.channels.items() if any(m.get("user") == user for m in ms)}
        return sorted(c for c in found if self.channel_types.get(c, channel_type_of(c)) != "im")

    def next_ts(self) -> str:
        self._micros += 100
        total = self.base_ts * 1_000_000 + self._micros
        return f"{total // 1_000_000}.{total % 1_000_000:06d}"

    def find(self, channel: str, ts: str) -> JSON | None:
        return next((m for m in self.channels.get(channel, []) if m["ts"] == ts), None)

    def get(self, channel: str, ts: str) -> JSON:
        message = self.find(channel, ts)
        if message is None:
            raise ApiError("message_not_found")
        return message

    def add(self, channel: str, message: JSON) -> JSON:
        """Stores a message (a `ts` is assigned) and updates its thread parent; returns it."""
        message = {"type": "message", **message, "ts": self.next_ts()}
        thread_ts = message.get("thread_ts")
        if thread_ts:
            parent = self.find(channel, thread_ts)
            if parent is not None and parent.get("thread_ts", parent["ts"]) != parent["ts"]:
                thread_ts = message["thread_ts"] = parent["thread_ts"]  # reply to a reply
                parent = self.find(channel, thread_ts)
            if parent is not None:
                parent["thread_ts"] = thread_ts
                parent["reply_count"] = parent.get("reply_count", 0) + 1
                users = parent.setdefault("reply_users", [])
                if message.get("user") and message["user"] not in users:
                    users.append(message["user"])
                parent["latest_reply"] = message["ts"]
                message.setdefault("parent_user_id", parent.get("user"))
        self.channel_types.setdefault(channel, channel_type_of(channel))
        self.channels.setdefault(channel, []).append(message)
        return message

    def delete(self, channel: str, ts: str) -> None:
        message = self.get(channel, ts)
        messages = self.channels[channel]
        if message.get("reply_count") and message.get("thread_ts") == ts:
            message.clear()
            message.update(type="message", subtype="tombstone", ts=ts, thread_ts=ts)
            message.update(text="This message was deleted.", reply_count=self._replies(channel, ts))
            return
        messages.remove(message)
        parent = self.find(channel, message.get("thread_ts") or "")
        if parent is not None and parent is not message:
            parent["reply_count"] = max(0, parent.get("reply_count", 1) - 1)

    def _replies(self, channel: str, ts: str) -> int:
        return sum(1 for m in self.channels.get(channel, []) if m.get("thread_ts") == ts) - 1

    def thread(self, channel: str, thread_ts: str) -> list[JSON]:
        """The thread's messages, parent first (the thread of a reply if `thread_ts` is one)."""
        root = self.find(channel, thread_ts)
        if root is not None and root.get("thread_ts"):
            thread_ts = root["thread_ts"]
        messages = [
            m
            for m in self.channels.get(channel, [])
            if m["ts"] == thread_ts or m.get("thread_ts") == thread_ts
        ]
        return copy.deepcopy(sorted(messages, key=lambda m: ts_key(m["ts"])))

    def history(self, channel: str) -> list[JSON]:
        """Top-level messages, newest first (as conversations.history answers)."""
        messages = self.channels.get(channel, [])
        top = [m for m in messages if m.get("thread_ts") in (None, m["ts"])]
        return copy.deepcopy(sorted(top, key=lambda m: ts_key(m["ts"]), reverse=True))

    def react(self, channel: str, ts: str, name: str, user: str, *, add: bool) -> None:
        message = self.get(channel, ts)
        reactions: list[JSON] = message.setdefault("reactions", [])
        entry = next((r for r in reactions if r["name"] == name), None)
        if add:
            if entry is not None and user in entry["users"]:
                raise ApiError("already_reacted")
            if entry is None:
                entry = {"name": name, "users": [], "count": 0}
                reactions.append(entry)
            entry["users"].append(user)
        else:
            if entry is None or user not in entry["users"]:
                raise ApiError("no_reaction")
            entry["users"].remove(user)
            if not entry["users"]:
                reactions.remove(entry)
        if entry is not None:
            entry["count"] = len(entry["users"])
        if not reactions:
            del message["reactions"]

    def reaction_names(self, channel: str, ts: str) -> set[str]:
        message = self.find(channel, ts)
        return {r["name"] for r in (message or {}).get("reactions", [])}


# --------------------------------------------------------------------------- transcript


def message_text(message: JSON) -> str:
    """What a person reads of a stored message: its section blocks' text, else its text."""
    sections = [
        b["text"]["text"]
        for b in message.get("blocks") or []
        if b.get("type") == "section" and isinstance(b.get("text"), dict)
    ]
    return "\n".join(sections) if sections else str(message.get("text", ""))


def _block_text(blocks: Any) -> str:
    parts: list[str] = []
    for block in blocks if isinstance(blocks, list) else []:
        if not isinstance(block, dict):
            continue
        for item in [block.get("text"), *block.get("elements", []), *block.get("fields", [])]:
            if isinstance(item, dict) and isinstance(item.get("text"), str):
                parts.append(item["text"])
    return " ".join(parts)


def message_summary(params: JSON, width: int = 100) -> str:
    """A one-line rendering of a message's text (or its blocks' text), cut at `width`."""
    text = params.get("text")
    if not isinstance(text, str) or not text.strip():
        text = _block_text(params.get("blocks"))
    line = re.sub(r"\s+", " ", text).strip()
    return line if len(line) <= width else line[: width - 1].rstrip() + "…"


def _stream_summary(params: JSON, width: int) -> str:
    """An append to a stream: its task lines (``[developer: … → complete]``), then its text."""
    given = params.get("chunks")
    chunks: list[JSON] = [c for c in given or [] if isinstance(c, dict)]
    texts = [str(params.get("markdown_text") or "")]
    texts += [str(c.get("text")) for c in chunks if c.get("type") == "markdown_text"]
    tasks = [f"[{c.get('title')} → {c.get('status')}]" for c in chunks
             if c.get("type") == "task_update"]  # fmt: skip
    return message_summary({"text": " ".join([*tasks, *texts])}, width)


def transcript_line(call: ApiCall, width: int = 100) -> str | None:
    """Renders a Web API call as a short terminal line; None for calls a reader does not need.

    e.g. `#D1 thread 1700000000.000100 | bot: ✅ developer finished…`
    """
    p, r = call.params, call.response
    channel = r.get("channel") or p.get("channel") or "?"
    ts = p.get("ts") or p.get("timestamp") or r.get("ts") or ""
    here = f"#{channel} {ts}".rstrip()
    where = f"#{channel} thread {p['thread_ts']}" if p.get("thread_ts") else here
    if call.method == "response_url":
        kind = "replaces the original" if p.get("replace_original") else p.get("response_type")
        return f"response_url | bot ({kind or 'ephemeral'}): {message_summary(p, width)}"
    if not call.ok:
        return f"{where} | {call.method} failed: {r.get('error')} (HTTP {call.status})"
    lines = {
        "chat.postMessage": f"{where} | bot: {message_summary(p, width)}",
        "chat.update": f"{here} | bot (edited): {message_summary(p, width)}",
        "chat.postEphemeral": f"{where} | bot → {p.get('user')} only: {message_summary(p, width)}",
        "chat.delete": f"{here} | bot deleted a message",
        "reactions.add": f"{here} | bot reacted :{p.get('name')}:",
        "reactions.remove": f"{here} | bot removed :{p.get('name')}:",
        "chat.startStream": f"{where} | bot (streaming): {_stream_summary(p, width)}",
        "chat.appendStream": f"{here} | bot (streaming): {_stream_summary(p, width)}",
        "chat.stopStream": f"{here} | bot (stream done): {message_summary(p, width)}",
        "assistant.threads.setStatus": f"#{p.get('channel_id')} thread {p.get('thread_ts')} | "
        f"status: {p.get('status') or '(cleared)'}",
        "assistant.threads.setTitle": f"#{p.get('channel_id')} | title: {p.get('title')}",
        "agents.sessions.setStatus": f"#{p.get('channel_id')} thread {p.get('thread_ts')} | "
        f"agent session: {p.get('status')}",
        "views.publish": f"home tab of {p.get('user_id')} | published",
    }
    return lines.get(call.method)
