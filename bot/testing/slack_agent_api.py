"""Web API methods of Slack's agent surfaces, emulated over a `MessageStore` (no I/O):
assistant threads (status, title, suggested prompts), streamed messages (`chat.startStream` /
`appendStream` / `stopStream`) and the App Home (`views.publish`).

As Slack does: a thread's status clears when the bot replies in it; a streamed message is a
message of the thread whose text grows with each append, and takes no more appends once
stopped; a stream in a channel must name its recipient; a call's text over 12,000 characters,
or a stream's over 40,000, is `msg_too_long`; appends to one stream faster than 10 per second
are answered HTTP 429 with a Retry-After.
"""

from __future__ import annotations

import copy
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from bot.testing.slack_model import JSON, ApiError, Identity, MessageStore

CALL_TEXT_LIMIT = 12_000
STREAM_TEXT_LIMIT = 40_000
APPENDS_PER_SECOND = 10
MAX_PROMPTS = 4


@dataclass
class Stream:
    """One streamed message as the emulator keeps it."""

    channel: str
    ts: str
    thread_ts: str
    recipient_user: str | None
    recipient_team: str | None
    task_display_mode: str | None
    text: str = ""
    state: str = "streaming"  # then "stopped"
    appends: list[JSON] = field(default_factory=list)  # each call's params, start included
    tasks: dict[str, JSON] = field(default_factory=dict)  # task id -> its latest task_update
    plan_title: str | None = None
    times: list[float] = field(default_factory=list)  # when each append came


def _list(value: Any) -> list[Any]:
    """A list param as slack_sdk sends it: a list, or JSON text of one."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError as exc:
            raise ApiError("invalid_arguments") from exc
    if value is None:
        return []
    if not isinstance(value, list):
        raise ApiError("invalid_arguments")
    return value


def _need(params: JSON, name: str, error: str = "invalid_arguments") -> str:
    value = params.get(name)
    if not isinstance(value, str) or not value:
        raise ApiError(error)
    return value


class AgentSurfaces:
    def __init__(
        self, store: MessageStore, identity: Identity, bot_message: Callable[[JSON], JSON]
    ) -> None:
        self.store = store
        self.identity = identity
        self._bot_message = bot_message
        self.statuses: dict[tuple[str, str], list[str]] = {}  # every status set, in order
        self.current_status: dict[tuple[str, str], str] = {}
        self.titles: dict[tuple[str, str], str] = {}
        self.prompts: dict[tuple[str, str], list[JSON]] = {}
        self.streams: dict[tuple[str, str], Stream] = {}
        self.home_views: dict[str, JSON] = {}
        self.methods: dict[str, Callable[[JSON], JSON]] = {
            "assistant.threads.setStatus": self.set_status,
            "assistant.threads.setTitle": self.set_title,
            "assistant.threads.setSuggestedPrompts": self.set_prompts,
            "chat.startStream": self.start_stream,
            "chat.appendStream": self.append_stream,
            "chat.stopStream": self.stop_stream,
            "views.publish": self.publish_view,
        }

    # ------------------------------------------------------------------ assistant threads

    def _thread(self, params: JSON) -> tuple[str, str]:
        channel = _need(params, "channel_id", "channel_not_found")
        thread_ts = _need(params, "thread_ts")
        return channel, thread_ts

    def set_status(self, params: JSON) -> JSON:
        key = self._thread(params)
        status = params.get("status")
        if not isinstance(status, str):
            raise ApiError("invalid_arguments")
        self.statuses.setdefault(key, []).append(status)
        self.current_status[key] = status
        return {}

    def replied(self, channel: str, thread_ts: str | None) -> None:
        """The bot posted in a thread: its status line goes away."""
        if thread_ts and self.current_status.get((channel, thread_ts)):
            self.current_status[(channel, thread_ts)] = ""

    def set_title(self, params: JSON) -> JSON:
        self.titles[self._thread(params)] = _need(params, "title")
        return {}

    def set_prompts(self, params: JSON) -> JSON:
        prompts = _list(params.get("prompts"))
        if not prompts or len(prompts) > MAX_PROMPTS:
            raise ApiError("invalid_arguments")
        for prompt in prompts:
            if not isinstance(prompt, dict) or not prompt.get("title") or not prompt.get("message"):
                raise ApiError("invalid_arguments")
        self.prompts[self._thread(params)] = prompts
        return {}

    # ------------------------------------------------------------------ streaming

    def start_stream(self, params: JSON) -> JSON:
        channel = _need(params, "channel", "channel_not_found")
        thread_ts = _need(params, "thread_ts")
        user, team = params.get("recipient_user_id"), params.get("recipient_team_id")
        if not channel.startswith("D"):
            if not user:
                raise ApiError("missing_recipient_user_id")
            if not team:
                raise ApiError("missing_recipient_team_id")
        stored = self.store.add(channel, self._bot_message({"thread_ts": thread_ts, "text": ""}))
        stream = Stream(channel, stored["ts"], thread_ts, user, team,
                        params.get("task_display_mode"))  # fmt: skip
        self._append(stream, params)
        self.streams[(channel, stream.ts)] = stream
        self.replied(channel, thread_ts)
        return {"channel": channel, "ts": stream.ts}

    def _stream(self, params: JSON) -> Stream:
        channel = _need(params, "channel", "channel_not_found")
        stream = self.streams.get((channel, _need(params, "ts", "message_not_found")))
        if stream is None:
            raise ApiError("message_not_found")
        if stream.state != "streaming":
            raise ApiError("message_not_in_streaming_state")
        return stream

    def append_stream(self, params: JSON) -> JSON:
        stream = self._stream(params)
        now = time.monotonic()
        if sum(1 for t in stream.times if now - t < 1.0) >= APPENDS_PER_SECOND:
            raise ApiError("ratelimited", status=429)
        stream.times.append(now)
        self._append(stream, params)
        return {"channel": stream.channel, "ts": stream.ts}

    def stop_stream(self, params: JSON) -> JSON:
        stream = self._stream(params)
        self._append(stream, params)
        stream.state = "stopped"
        message = self.store.get(stream.channel, stream.ts)
        blocks = _list(params.get("blocks"))
        if blocks:
            message["blocks"] = blocks
        if params.get("metadata"):
            message["metadata"] = params["metadata"]
        return {"channel": stream.channel, "ts": stream.ts, "message": copy.deepcopy(message)}

    def _append(self, stream: Stream, params: JSON) -> None:
        """Adds a call's markdown text and chunks to the stream (all or nothing)."""
        text = params.get("markdown_text") or ""
        if not isinstance(text, str):
            raise ApiError("invalid_arguments")
        pieces = [text] if text else []
        tasks: dict[str, JSON] = {}
        plan = None
        for chunk in _list(params.get("chunks")):
            kind = chunk.get("type") if isinstance(chunk, dict) else None
            if kind == "markdown_text" and isinstance(chunk.get("text"), str):
                pieces.append(chunk["text"])
            elif kind == "task_update" and chunk.get("id") and chunk.get("status") in (
                "pending", "in_progress", "complete", "error",
            ):  # fmt: skip
                tasks[str(chunk["id"])] = dict(chunk)
            elif kind == "plan_update" and isinstance(chunk.get("title"), str):
                plan = chunk["title"]
            elif kind != "blocks":
                raise ApiError("invalid_chunks")
        added = "".join(pieces)
        if len(added) > CALL_TEXT_LIMIT or len(stream.text) + len(added) > STREAM_TEXT_LIMIT:
            raise ApiError("msg_too_long")
        stream.text += added
        stream.tasks.update(tasks)
        stream.plan_title = plan or stream.plan_title
        stream.appends.append(copy.deepcopy(params))
        self.store.get(stream.channel, stream.ts)["text"] = stream.text

    # ------------------------------------------------------------------ App Home

    def publish_view(self, params: JSON) -> JSON:
        user = _need(params, "user_id", "user_not_found")
        view = params.get("view")
        if isinstance(view, str):
            try:
                view = json.loads(view)
            except ValueError as exc:
                raise ApiError("invalid_arguments") from exc
        if not isinstance(view, dict) or view.get("type") != "home":
            raise ApiError("invalid_arguments")
        view = {**view, "id": f"V{len(self.home_views) + 1:08d}"}
        self.home_views[user] = view
        return {"view": copy.deepcopy(view)}
