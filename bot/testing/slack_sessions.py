"""Slack's agent sessions, emulated over a `MessageStore` (no I/O): `agents.sessions.setStatus`
(creates a thread's session, or moves its status), `agents.sessions.rename`, and the session
status a `chat.stopStream` may carry.

As Slack documents: a session belongs to one thread; its title (at most 200 characters) is
given on the creating call or by a rename; while the app is not subscribed to
`agent_session_stopped`, setStatus answers ok with the warning
`missing_agent_session_stopped_event_subscription` (and people get a spinner with no Stop
button). An app not declared an agent is refused every call (`not_declared`, e.g.
"not_allowed"). What a user pressing Stop does is `SessionsApi.press_stop`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from bot.testing.slack_model import JSON, ApiError, MessageStore

SESSION_STATUSES = ("processing", "active", "suspended", "closed")
TITLE_LIMIT = 200
UNSUBSCRIBED = "missing_agent_session_stopped_event_subscription"


@dataclass
class Session:
    """One thread's agent session as the emulator keeps it."""

    channel: str
    thread_ts: str
    status: str
    title: str | None
    initiator: str | None
    history: list[str] = field(default_factory=list)  # every status it moved to, in order
    times: list[float] = field(default_factory=list)  # when it moved to each
    stops: int = 0  # how often someone pressed Stop


def _text(params: JSON, name: str, error: str = "invalid_arguments") -> str:
    value = params.get(name)
    if not isinstance(value, str) or not value:
        raise ApiError(error)
    return value


def _title(params: JSON) -> str | None:
    title = params.get("title")
    if title is None:
        return None
    if not isinstance(title, str) or not title.strip() or len(title) > TITLE_LIMIT:
        raise ApiError("invalid_title")
    return title


class SessionsApi:
    def __init__(self, store: MessageStore) -> None:
        self.store = store
        self.sessions: dict[tuple[str, str], Session] = {}
        # Settings a test may change: whether the app subscribes to agent_session_stopped,
        # and the error an app not declared an agent gets (None: it is declared one).
        self.stop_subscribed = True
        self.not_declared: str | None = None
        self.methods = {
            "agents.sessions.setStatus": self.set_status,
            "agents.sessions.rename": self.rename,
        }

    def _key(self, params: JSON) -> tuple[str, str]:
        if self.not_declared:
            raise ApiError(self.not_declared)
        channel = _text(params, "channel_id", "channel_not_found")
        thread_ts = _text(params, "thread_ts")
        if self.store.find(channel, thread_ts) is None:
            raise ApiError("thread_not_found")
        return channel, thread_ts

    def set_status(self, params: JSON) -> JSON:
        key = self._key(params)
        status = params.get("status")
        if status not in SESSION_STATUSES:
            raise ApiError("invalid_status")
        title = _title(params)
        initiator = params.get("initiator_user_id")
        session = self.sessions.get(key)
        if session is None:
            session = Session(*key, str(status), title, str(initiator) if initiator else None)
            self.sessions[key] = session
        elif title is not None:
            session.title = title
        self._move(session, str(status))
        if self.stop_subscribed:
            return {}
        return {"warning": UNSUBSCRIBED, "response_metadata": {"warnings": [UNSUBSCRIBED]}}

    def rename(self, params: JSON) -> JSON:
        session = self.sessions.get(self._key(params))
        if session is None:
            raise ApiError("session_not_found")
        title = _title(params)
        if title is None:
            raise ApiError("invalid_title")
        session.title = title
        return {}

    def stream_stopped(self, channel: str, thread_ts: str, status: object) -> None:
        """`chat.stopStream` with a `session_status`: the thread's session takes it."""
        if status is None:
            return
        if status not in SESSION_STATUSES:
            raise ApiError("invalid_session_status")
        session = self.sessions.get((channel, thread_ts))
        if session is not None:
            self._move(session, str(status))

    def press_stop(self, channel: str, thread_ts: str) -> Session:
        """Someone pressed the session's Stop button (the caller stops the thread's streams
        and delivers `agent_session_stopped`). Slack shows it only to subscribed apps."""
        session = self.sessions.get((channel, thread_ts))
        if session is None:
            raise ValueError(f"no agent session in {channel}/{thread_ts}")
        if not self.stop_subscribed:
            raise ValueError("the app is not subscribed to agent_session_stopped: no Stop button")
        session.stops += 1
        return session

    def _move(self, session: Session, status: str) -> None:
        if session.history and session.status == status:
            return  # the same status again moves nothing
        session.status = status
        session.history.append(status)
        session.times.append(time.monotonic())
