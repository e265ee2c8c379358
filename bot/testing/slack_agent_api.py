"""Web API methods of Slack's agent surfaces, emulated over a `MessageStore` (no I/O):
assistant threads (status, title, suggested prompts), streamed messages (`chat.startStream` /
`appendStream` / `stopStream`), the App Home (`views.publish`) and agent sessions
(`bot.testing.slack_sessions`).

As Slack does: a thread's status clears when the bot replies in it; a streamed message is a
message of the thread whose text grows with each append, and takes no more appends once
stopped; a stream in a channel must name its recipient; a call's text over 12,000 characters
(Slack's documented limit), or a stream's over `stream_text_limit`, is `msg_too_long`.
Slack documents appendStream as Tier 4 (100+ a minute, bursts allowed); appends to one stream
beyond `appends_per_window` within `append_window` seconds are answered HTTP 429 with a
Retry-After, so a test can hit the limit quickly.
"""

from __future__ import annotations

import copy
import json
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from bot.testing.slack_model import JSON, ApiError, Identity, MessageStore
from bot.testing.slack_sessions import SessionsApi

CALL_TEXT_LIMIT = 12_000
STREAM_TEXT_LIMIT = 40_000
APPENDS_PER_SECOND = 10
MAX_PROMPTS = 4
MAX_LOADING_MESSAGES = 10
TASK_STATUSES = ("pending", "in_progress", "complete", "error")


@dataclass(frozen=True)
class StatusSet:
    """One `assistant.threads.setStatus` call: the status ("" clears) and when it came."""

    status: str
    loading_messages: tuple[str, ...]
    time: float


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
    tasks: dict[str, JSON] = field(default_factory=dict)  # task id -> its merged task_update
    plan_title: str | None = None
    times: list[float] = field(default_factory=list)  # when each append came
    mode: str | None = None  # "markdown_text" or "chunks": what the first text came as
    metadata: JSON | None = None
    session_status: str | None = None

    def task_trail(self, task_id: str) -> list[str]:
        """Every status task `task_id` was given, in order."""
        return [
            str(chunk.get("status"))
            for params in self.appends
            for chunk in params.get("chunks") or []
            if chunk.get("type") == "task_update" and str(chunk.get("id")) == task_id
        ]


@dataclass
class _Piece:
    """What one start/append/stop call adds to a stream (checked before anything changes)."""

    params: JSON
    text: str
    tasks: list[JSON]
    plan: str | None
    mode: str | None


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
        # Limits a test may change.
        self.call_text_limit = CALL_TEXT_LIMIT
        self.stream_text_limit = STREAM_TEXT_LIMIT
        self.appends_per_window = APPENDS_PER_SECOND
        self.append_window = 1.0
        # When set, startStream answers this error (a workspace or token that cannot stream).
        self.streaming_refused: str | None = None
        # Opt-in: the documented but unverified errors for mixing markdown_text and chunks.
        # Slack refuses a stream that mixes markdown_text and chunks across its calls.
        self.strict_stream_modes = True
        self.statuses: dict[tuple[str, str], list[StatusSet]] = {}  # every status set, in order
        self.current_status: dict[tuple[str, str], str] = {}
        self.titles: dict[tuple[str, str], str] = {}
        self.prompts: dict[tuple[str, str], list[JSON]] = {}
        self.prompt_titles: dict[tuple[str, str], str] = {}
        self.streams: dict[tuple[str, str], Stream] = {}
        self.home_views: dict[str, JSON] = {}
        self.sessions = SessionsApi(store)
        self.methods: dict[str, Callable[[JSON], JSON]] = {
            **self.sessions.methods,
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
        loading = _list(params.get("loading_messages"))
        if not isinstance(status, str) or len(loading) > MAX_LOADING_MESSAGES:
            raise ApiError("invalid_arguments")
        entry = StatusSet(status, tuple(str(m) for m in loading), time.time())
        self.statuses.setdefault(key, []).append(entry)
        self.current_status[key] = status
        return {}

    def replied(self, channel: str, thread_ts: str | None) -> None:
        """The bot posted in a thread: its status line goes away."""
        if thread_ts and self.current_status.get((channel, thread_ts)):
            self.current_status[(channel, thread_ts)] = ""

    def set_title(self, params: JSON) -> JSON:
        key = self._thread(params)
        title = _need(params, "title")
        self.titles[key] = title
        root = self.store.find(*key)
        if root is not None and root.get("subtype") == "assistant_app_thread":
            root["assistant_app_thread"] = {"title": title, "title_blocks": [], "artifacts": []}
        return {}

    def set_prompts(self, params: JSON) -> JSON:
        prompts = _list(params.get("prompts"))
        if not prompts or len(prompts) > MAX_PROMPTS:
            raise ApiError("invalid_arguments")
        for prompt in prompts:
            if not isinstance(prompt, dict) or not prompt.get("title") or not prompt.get("message"):
                raise ApiError("invalid_arguments")
        key = self._thread(params)
        self.prompts[key] = prompts
        title = params.get("title")
        if isinstance(title, str) and title:
            self.prompt_titles[key] = title
        else:
            self.prompt_titles.pop(key, None)
        return {}

    # ------------------------------------------------------------------ streaming

    def start_stream(self, params: JSON) -> JSON:
        channel = _need(params, "channel", "channel_not_found")
        if self.streaming_refused:
            raise ApiError(self.streaming_refused)
        thread_ts = _need(params, "thread_ts")
        user, team = params.get("recipient_user_id"), params.get("recipient_team_id")
        if not channel.startswith("D"):
            if not user:
                raise ApiError("missing_recipient_user_id")
            if not team:
                raise ApiError("missing_recipient_team_id")
        stream = Stream(channel, "", thread_ts, user, team, params.get("task_display_mode"))
        piece = self._piece(stream, params)  # refused before the message exists
        stored = self.store.add(channel, self._bot_message({"thread_ts": thread_ts, "text": ""}))
        stream.ts = stored["ts"]
        self.streams[(channel, stream.ts)] = stream
        self._apply(stream, piece)
        self.replied(channel, thread_ts)
        return {"channel": channel, "ts": stream.ts}

    def _stream(self, params: JSON) -> Stream:
        channel = _need(params, "channel", "channel_not_found")
        ts = _need(params, "ts", "message_not_found")
        stream = self.streams.get((channel, ts))
        if stream is None:
            message = self.store.get(channel, ts)
            if message.get("bot_id") != self.identity.bot_id:
                raise ApiError("message_not_owned_by_app")
            raise ApiError("message_not_in_streaming_state")
        if stream.state != "streaming":
            raise ApiError("message_not_in_streaming_state")
        return stream

    def append_stream(self, params: JSON) -> JSON:
        stream = self._stream(params)
        now = time.monotonic()
        recent = [t for t in stream.times if now - t < self.append_window]
        if len(recent) >= self.appends_per_window:
            wait = math.ceil(self.append_window - (now - recent[0]))
            raise ApiError("ratelimited", status=429, retry_after=max(1, wait))
        stream.times.append(now)
        self._apply(stream, self._piece(stream, params))
        return {"channel": stream.channel, "ts": stream.ts}

    def stop_stream(self, params: JSON) -> JSON:
        stream = self._stream(params)
        blocks = _list(params.get("blocks"))
        piece = self._piece(stream, params)
        # The thread's agent session takes the status the stream ends with, if any.
        self.sessions.stream_stopped(stream.channel, stream.thread_ts, params.get("session_status"))
        self._apply(stream, piece)
        stream.state = "stopped"
        stream.session_status = params.get("session_status") or None
        message = self.store.get(stream.channel, stream.ts)
        if blocks:
            message["blocks"] = blocks
        if isinstance(params.get("metadata"), dict):
            message["metadata"] = stream.metadata = params["metadata"]
        return {"channel": stream.channel, "ts": stream.ts, "message": copy.deepcopy(message)}

    def _piece(self, stream: Stream, params: JSON) -> _Piece:
        """Reads and checks a call's markdown text and chunks; raises without changing a thing."""
        text = params.get("markdown_text") or ""
        if not isinstance(text, str):
            raise ApiError("invalid_arguments")
        chunks = _list(params.get("chunks"))
        pieces = [text] if text else []
        tasks: list[JSON] = []
        plan = None
        for chunk in chunks:
            kind = chunk.get("type") if isinstance(chunk, dict) else None
            if kind == "markdown_text" and isinstance(chunk.get("text"), str):
                pieces.append(chunk["text"])
            elif kind == "task_update" and chunk.get("id") and chunk.get("status") in TASK_STATUSES:
                tasks.append(dict(chunk))
            elif kind == "plan_update" and isinstance(chunk.get("title"), str):
                plan = chunk["title"]
            elif kind != "blocks" or not isinstance(chunk.get("blocks"), list):
                raise ApiError("invalid_chunks")
        mode = "chunks" if chunks else "markdown_text" if text else None
        if self.strict_stream_modes:
            if text and chunks:
                raise ApiError("cannot_provide_both_markdown_text_and_chunks")
            if stream.mode and mode and mode != stream.mode:
                raise ApiError("streaming_mode_mismatch")
        added = "".join(pieces)
        if any(len(p) > self.call_text_limit for p in pieces):
            raise ApiError("msg_too_long")
        if len(stream.text) + len(added) > self.stream_text_limit:
            raise ApiError("msg_too_long")
        params = {**copy.deepcopy(params), "chunks": copy.deepcopy(chunks)}
        return _Piece(params, added, tasks, plan, mode)

    def _apply(self, stream: Stream, piece: _Piece) -> None:
        stream.text += piece.text
        for task in piece.tasks:
            # A task keeps its place; a later update's fields win.
            task_id = str(task["id"])
            stream.tasks[task_id] = {**stream.tasks.get(task_id, {}), **task}
        stream.plan_title = piece.plan or stream.plan_title
        stream.mode = stream.mode or piece.mode
        stream.appends.append(piece.params)
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
        # A user's Home tab keeps its view id across publishes.
        shown = self.home_views.get(user)
        view_id = shown["id"] if shown else f"V{len(self.home_views) + 1:08d}"
        view = {**view, "id": view_id}
        self.home_views[user] = view
        return {"view": copy.deepcopy(view)}
