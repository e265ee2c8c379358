"""An agent's reply streamed into its thread: ``chat.startStream`` opens the message, the
agent's text and its drafted agents (task lines of a plan: pending → in progress → complete or
error) are appended as they come, and the structured result closes it (``chat.stopStream``,
sent by the outbox so it is never lost).

Appends are coalesced: the watcher flushes what gathered once per status tick, so a chatty
agent costs one call per tick, well under the method's rate tier. A stream Slack refuses
(``start`` returns None; a passing failure is tried again first) or ends early leaves the
thread to today's edited status message.
Streamed text stops short of Slack's size limit with a note; the whole text stays in the
agent's journal, and the result is sent in full either way.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, Literal

from slack_sdk.web.async_client import AsyncWebClient

from bot.blocks import ContextActionsBlock, FeedbackButton, SlackMessage, escape, excerpt
from bot.parsing import AGENT_ID_RE
from bot.poster import CALL_ERRORS, DeliveryError, classify, retry_transient
from harness.agents.visibility import is_direct_message
from harness.retry import Backoff
from harness.tasks.model import DispatchStatus, FeedbackValue, ThreadRef

logger = logging.getLogger(__name__)

TaskStatus = Literal["pending", "in_progress", "complete", "error"]

# Slack refuses a streamed message over 40,000 characters of text; appends stop short of it.
STREAM_TEXT_LIMIT = 36_000
CUT_NOTE = "\n\n_(the rest of what the agent said is in its journal: `harness show {slug}`)_"
# Errors that say the message is no longer a stream (it was stopped, or Slack timed it out).
STREAM_OVER = frozenset({"message_not_in_streaming_state", "message_not_found"})
FEEDBACK_ACTION = "harness_feedback"
# The last append of a stream is tried again after 0.5 s, 1 s, 2 s...
_APPEND_BACKOFF = Backoff(first=0.5, cap=4.0)
# Opening a stream: three tries, 0.5 s then 1 s apart (a 429's Retry-After is slack_sdk's).
START_ATTEMPTS = 3
_START_BACKOFF = Backoff(first=0.5, cap=2.0)


def task_status(status: DispatchStatus) -> TaskStatus:
    if status == "queued":
        return "pending"
    if status == "running":
        return "in_progress"
    return "complete" if status == "completed" else "error"


@dataclass(frozen=True)
class TaskLine:
    """A drafted agent as one line of its parent's plan."""

    agent_id: str
    title: str
    status: TaskStatus

    def chunk(self) -> dict[str, Any]:
        return {"type": "task_update", "id": self.agent_id, "title": self.title,
                "status": self.status}  # fmt: skip


def task_title(role: str, prompt: str) -> str:
    return f"{role}: {excerpt(' '.join(prompt.split()), 120)}"


def stream_header(role: str, agent_id: str, intro: str | None) -> str:
    """The first line of an agent's streamed reply."""
    line = f"*{escape(role)}* (agent `{escape(agent_id)}`):"
    return f"{intro}\n{line}" if intro else line


def with_feedback(message: SlackMessage, task_slug: str, agent_id: str) -> SlackMessage:
    """The result with Slack's feedback buttons under it (their value names the agent)."""

    def button(text: str, verdict: str) -> FeedbackButton:
        value = f"{verdict}:{agent_id}:{task_slug}"
        return {"text": {"type": "plain_text", "text": text}, "value": value}

    buttons: ContextActionsBlock = {
        "type": "context_actions",
        "elements": [
            {
                "type": "feedback_buttons",
                "action_id": FEEDBACK_ACTION,
                "positive_button": button("Good result", "good"),
                "negative_button": button("Bad result", "bad"),
            }
        ],
    }
    return {"text": message["text"], "blocks": [*message["blocks"], buttons]}


def parse_feedback(value: str) -> tuple[FeedbackValue, str, str] | None:
    """``"good:a1b2:some-task"`` -> ("good", "a1b2", "some-task"); None for anything else
    (values are untrusted)."""
    verdict, agent_id, slug = [*value.split(":", 2), "", ""][:3]
    if verdict not in ("good", "bad") or not AGENT_ID_RE.match(agent_id) or not slug:
        return None
    return ("good" if verdict == "good" else "bad"), agent_id, slug


@dataclass(frozen=True)
class Recipient:
    """Who a stream in a channel is for (Slack requires it outside DMs)."""

    user: str
    team: str


class ReplyStream:
    def __init__(
        self, client: AsyncWebClient, thread: ThreadRef, task_slug: str, recipient: Recipient | None
    ) -> None:
        self.client = client
        self.thread = thread
        self.task_slug = task_slug
        self.recipient = recipient
        self.ts: str | None = None
        self.over = False  # Slack ended it, or would take no more
        self.appends = 0
        self._streamed = 0
        self._cut = False
        self._text: list[str] = []
        self._tasks: dict[str, TaskLine] = {}
        self._shown: dict[str, TaskLine] = {}

    async def start(self, header: str) -> str | None:
        """Opens the stream with ``header``; its ts, or None when Slack refuses streaming."""
        params: dict[str, Any] = {"channel": self.thread.channel,
                                  "thread_ts": self.thread.thread_ts,
                                  # Chunks from the first call: Slack refuses a stream
                                  # that mixes them with plain markdown_text appends.
                                  "chunks": [{"type": "markdown_text", "text": header}],
                                  "task_display_mode": "plan"}  # fmt: skip
        if self.recipient is not None and not is_direct_message(self.thread.channel):
            params |= {"recipient_user_id": self.recipient.user,
                       "recipient_team_id": self.recipient.team}  # fmt: skip

        def failed(error: DeliveryError) -> None:
            logger.info("opening a stream in %s failed (%s): trying again",
                        self.thread.channel, error.error)  # fmt: skip

        sent = False

        async def open_once() -> str | None:
            nonlocal sent
            # startStream takes no key: a try whose answer was lost (a timeout, a reset) may
            # have opened the stream, so the thread is looked at before opening another.
            if sent and (found := await self._opened(header)) is not None:
                return found
            sent = True
            ts = (await self.client.chat_startStream(**params)).get("ts")
            return ts if isinstance(ts, str) else None

        try:
            # A passing failure (5xx, a timeout, a rate limit) is tried again before the
            # thread settles for an edited message; a refusal is not.
            self.ts = await retry_transient(
                open_once, attempts=START_ATTEMPTS, backoff=_START_BACKOFF, on_retry=failed
            )
        except DeliveryError as error:
            found = await self._opened(header) if error.transient else None
            if found is None:
                logger.info("streaming refused in %s (%s): editing a status message instead",
                            self.thread.channel, error.error)  # fmt: skip
                return None
            self.ts = found
        self._streamed = len(header)
        return self.ts

    async def _opened(self, header: str) -> str | None:
        """The ts of the stream a try before opened (its answer lost) in the thread: the
        bot's message there that starts with ``header`` (which names the agent). None when
        there is none, or the thread cannot be read."""
        try:
            response = await self.client.conversations_replies(
                channel=self.thread.channel, ts=self.thread.thread_ts, limit=1000
            )
        except CALL_ERRORS as exc:
            logger.info("cannot look for a stream in %s: %s", self.thread, classify(exc).error)
            return None
        for message in response.get("messages") or []:
            if not isinstance(message, dict) or not message.get("bot_id"):
                continue
            ts = message.get("ts")
            if str(message.get("text") or "").startswith(header) and isinstance(ts, str):
                logger.info("a stream in %s was opened, its answer lost: not opened again",
                            self.thread)  # fmt: skip
                return ts
        return None

    def say(self, text: str) -> None:
        """Queues agent text for the next flush (cut with a note near the size limit)."""
        if self._cut or not text.strip():
            return
        pending = sum(len(t) + 2 for t in self._text)
        if self._streamed + pending + len(text) + 2 > STREAM_TEXT_LIMIT:
            self._text.append(CUT_NOTE.format(slug=self.task_slug).strip())
            self._cut = True
            return
        self._text.append(text)

    def task(self, line: TaskLine) -> None:
        """Queues a drafted agent's task line, when it changed."""
        if self._shown.get(line.agent_id) != line:
            self._tasks[line.agent_id] = line

    @property
    def pending(self) -> bool:
        return bool(self._text or self._tasks)

    async def flush(self, *, attempts: int = 1) -> None:
        """One append with everything queued since the last; a transient failure keeps it for
        the next flush (tried again here, after 0.5 s, 1 s, ..., up to ``attempts`` times: the
        last flush has no next), a stream Slack ended takes no more."""
        if self.ts is None or self.over or not self.pending:
            return
        text = "\n\n" + "\n\n".join(self._text) if self._text else ""
        chunks = [line.chunk() for line in self._tasks.values()]
        if text:
            chunks.insert(0, {"type": "markdown_text", "text": text})
        ts = self.ts

        def failed(error: DeliveryError) -> None:
            logger.info("append to the stream in %s failed: %s", self.thread, error.error)

        try:
            await retry_transient(
                lambda: self.client.chat_appendStream(
                    channel=self.thread.channel, ts=ts, chunks=chunks
                ),
                attempts=attempts,
                backoff=_APPEND_BACKOFF,
                on_retry=failed,
            )
        except DeliveryError as error:
            if error.transient:  # kept for the next flush
                failed(error)
            else:
                self._give_up(error)
            return
        self.appends += 1
        self._streamed += len(text)
        self._shown.update(self._tasks)
        self._text.clear()
        self._tasks.clear()

    def _give_up(self, error: DeliveryError) -> None:
        if error.error in STREAM_OVER:
            self.over = True
        else:  # e.g. msg_too_long: this text is dropped (the journal keeps it), not retried
            logger.warning("append to the stream in %s refused: %s", self.thread, error.error)
        self._text.clear()
        self._tasks.clear()
