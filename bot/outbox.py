"""The outbox: everything the bot owes a thread (results, failure and interruption notices,
the clean-up of status messages) is stored in the ledger before it is sent, then delivered
step by step until Slack has taken it.

A transient failure (HTTP 5xx or 429, a network error or timeout, an ``ok: false`` error Slack
documents as temporary) is retried with backoff, for as long as it takes, and what was not
delivered when the bot stopped is sent after it starts again. A permanent failure
(``channel_not_found``, ``not_in_channel``, ...) is given up on with its reason, which is
recorded on the agent's dispatch record. Entries of one thread go out in order; threads do not
wait for each other. Steps are recorded as they succeed, so a retry never repeats one.

The reaction on the person's message is the last step of a result, so a thread never shows ✅
over a status message still saying "working…".
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Literal, NotRequired, TypedDict

import aiohttp
from prometheus_client import Gauge
from slack_sdk.errors import SlackApiError, SlackClientError
from slack_sdk.web.async_client import AsyncWebClient

from bot.blocks import SlackMessage
from bot.poster import DeliveryError, Poster, classify, message_content
from harness.clock import Clock
from harness.retry import Backoff
from harness.tasks.ledger import Ledger, Owed
from harness.tasks.model import ThreadRef

logger = logging.getLogger(__name__)

# A status message that is gone or can no longer be edited: post the result instead.
_MESSAGE_GONE = frozenset({"message_not_found", "cant_update_message", "edit_window_closed"})
_LANES = 8  # threads delivered at once


class PostStep(TypedDict):
    op: Literal["post"]
    message: SlackMessage | str


class UpdateStep(TypedDict):
    """Edit a message in place; when it is gone, post ``message`` instead."""

    op: Literal["update"]
    ts: str
    message: SlackMessage | str


class DeleteStep(TypedDict):
    """Remove a status message; when it cannot be removed, point it at what follows."""

    op: Literal["delete"]
    ts: str


class StopStreamStep(TypedDict):
    """Close a streamed reply with ``message``; when it is no longer a stream, edit it to
    ``message`` instead (and when it is gone, post it)."""

    op: Literal["stop_stream"]
    ts: str
    message: SlackMessage
    session_status: NotRequired[str]  # the thread's agent session takes it


class ReactStep(TypedDict):
    op: Literal["react"]
    channel: str
    ts: str
    name: str


class UploadStep(TypedDict):
    """Share an agent's kept diff as a file; when Slack will not take it, say where it is."""

    op: Literal["upload"]
    task_slug: str
    agent_id: str
    filename: str
    title: str
    comment: str


Step = PostStep | UpdateStep | StopStreamStep | DeleteStep | ReactStep | UploadStep


class AgentRef(TypedDict):
    task_slug: str
    agent_id: str


class Entry(TypedDict):
    """An outbox entry as the ledger keeps it."""

    thread: list[str]  # [channel, thread_ts]
    steps: list[Step]
    agent: NotRequired[AgentRef]


def backoff(attempts: int, limit: float) -> float:
    """Seconds before the next try after ``attempts`` earlier failures: 1, 2, 4, ... up to
    ``limit``."""
    return Backoff(first=1.0, cap=limit).delay(attempts)


def lane_of(thread: ThreadRef) -> str:
    return f"{thread.channel}/{thread.thread_ts}"


class Outbox:
    def __init__(
        self,
        ledger: Ledger,
        client: AsyncWebClient,
        poster: Poster,
        *,
        read_diff: Callable[[str, str], Awaitable[str | None]],
        on_given_up: Callable[[AgentRef, str], Awaitable[None]],
        max_delay: float = 30.0,
        clock: Clock | None = None,
        undelivered: Gauge | None = None,
    ) -> None:
        self.ledger = ledger
        self.client = client
        self.poster = poster
        self._read_diff = read_diff
        self._on_given_up = on_given_up
        self.max_delay = max_delay
        # Due times are the ledger's (epoch seconds of its clock's wall time): its clock by
        # default, so the two agree.
        self._clock = clock or ledger.clock
        # What the threads are still owed (a metric): set at each pass, less each entry done.
        self._undelivered = undelivered
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._idle = asyncio.Event()

    async def owe(
        self,
        thread: ThreadRef,
        steps: Sequence[Step],
        *,
        agent: AgentRef | None = None,
        settles: str | None = None,
        handles: str | None = None,
    ) -> None:
        """Stores what the thread is owed (ending the watch of agent ``settles``, and the
        request ``handles``, with it), then has it delivered."""
        entry: Entry = {"thread": [thread.channel, thread.thread_ts], "steps": list(steps)}
        if agent is not None:
            entry["agent"] = agent
        await self.ledger.owe(lane_of(thread), dict(entry), settles=settles, handles=handles)
        if self._undelivered is not None:
            self._undelivered.inc()
        self._idle.clear()
        self._wake.set()

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run(), name="outbox")

    async def stop(self, timeout: float) -> None:
        """Delivers what it can within ``timeout`` s; the rest waits in the ledger for the
        next start."""
        if self._task is None:
            return
        self._wake.set()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._idle.wait(), timeout)
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task
        self._task = None

    async def settled(self, timeout: float) -> None:
        """Waits until nothing is due (tests, shutdown)."""
        self._wake.set()
        await asyncio.wait_for(self._idle.wait(), timeout)

    # ------------------------------------------------------------------ the delivery loop

    async def _run(self) -> None:
        while True:
            self._wake.clear()
            try:
                wait = await self.deliver_due()
            except Exception:  # the loop must outlive one bad pass (e.g. the disk)
                logger.exception("the outbox failed to deliver; trying again shortly")
                wait = self.max_delay
            if wait is None and not self._wake.is_set():
                self._idle.set()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), wait)

    def _now(self) -> float:
        return self._clock.now().timestamp()

    async def deliver_due(self) -> float | None:
        """One pass over what is due: seconds until the next entry falls due, None when
        nothing is left."""
        pending = await self.ledger.pending()
        if self._undelivered is not None:
            self._undelivered.set(len(pending))
        lanes: dict[str, list[Owed]] = {}
        for owed in pending:
            lanes.setdefault(owed.lane, []).append(owed)
        limit = asyncio.Semaphore(_LANES)

        async def lane(entries: list[Owed]) -> float | None:
            async with limit:
                return await self._deliver_lane(entries)

        waits = await asyncio.gather(*(lane(entries) for entries in lanes.values()))
        due = [wait for wait in waits if wait is not None]
        return max(min(due), 0.0) if due else None

    async def _deliver_lane(self, entries: list[Owed]) -> float | None:
        for owed in entries:
            now = self._now()
            if owed.due > now:
                return owed.due - now  # a later entry of the thread waits for this one
            outcome = await self._deliver(owed)
            if outcome is not None:
                return outcome
            if self._undelivered is not None:
                self._undelivered.dec()  # delivered or given up
        return None

    async def _deliver(self, owed: Owed) -> float | None:
        """Delivers one entry from where it stopped; the wait before its retry, or None when
        it is done with (delivered or given up)."""
        entry: Entry = owed.data  # type: ignore[assignment]
        channel, thread_ts = entry["thread"]
        thread = ThreadRef(channel, thread_ts)
        steps = entry["steps"]
        for index in range(owed.step, len(steps)):
            try:
                await self._do(thread, steps[index])
            except DeliveryError as exc:
                if not exc.transient:
                    logger.warning("delivery to %s given up: %s", channel, exc.error)
                    await self.ledger.give_up(owed.id, exc.error)
                    agent = entry.get("agent")
                    if agent is not None:
                        await self._on_given_up(agent, exc.error)
                    return None
                delay = backoff(owed.attempts, self.max_delay)
                logger.warning(
                    "delivery to %s failed (%s); retrying in %.1f s", channel, exc, delay
                )
                if index > owed.step:
                    await self.ledger.advance(owed.id, index)
                await self.ledger.postpone(owed.id, self._now() + delay, exc.error)
                return delay
            if index + 1 < len(steps):
                await self.ledger.advance(owed.id, index + 1)
        await self.ledger.delivered(owed.id)
        return None

    # ------------------------------------------------------------------ steps

    async def _do(self, thread: ThreadRef, step: Step) -> None:
        if step["op"] == "post":
            await self._post(thread, step["message"])
        elif step["op"] == "update":
            await self._update(thread, step["ts"], step["message"])
        elif step["op"] == "stop_stream":
            try:
                await self._call(self.client.chat_stopStream, channel=thread.channel,
                                 ts=step["ts"], blocks=step["message"]["blocks"],
                                 session_status=step.get("session_status"))  # fmt: skip
            except DeliveryError as exc:
                if exc.transient:
                    raise
                logger.info("stream %s not stopped (%s): edited instead", step["ts"], exc.error)
                await self._update(thread, step["ts"], step["message"])
        elif step["op"] == "delete":
            try:
                await self._call(self.client.chat_delete, channel=thread.channel, ts=step["ts"])
            except DeliveryError as exc:
                if exc.transient:
                    raise
                if exc.error in _MESSAGE_GONE:
                    return
                with contextlib.suppress(DeliveryError):
                    await self._call(
                        self.client.chat_update,
                        channel=thread.channel,
                        ts=step["ts"],
                        text="(the result is further down)",
                    )
        elif step["op"] == "react":
            try:
                await self._call(
                    self.client.reactions_add,
                    channel=step["channel"],
                    timestamp=step["ts"],
                    name=step["name"],
                )
            except DeliveryError as exc:
                if exc.transient:
                    raise
                # Already there, or the message is gone: nothing is owed.
                logger.info("reaction :%s: not added: %s", step["name"], exc.error)
        else:
            await self._upload(thread, step)

    async def _update(self, thread: ThreadRef, ts: str, message: SlackMessage | str) -> None:
        try:
            await self._call(self.client.chat_update, channel=thread.channel, ts=ts,
                             **message_content(message))  # fmt: skip
        except DeliveryError as exc:
            if exc.transient or exc.error not in _MESSAGE_GONE:
                raise
            await self._post(thread, message)

    async def _post(self, thread: ThreadRef, message: SlackMessage | str) -> None:
        response = await self._call(
            self.client.chat_postMessage,
            channel=thread.channel,
            thread_ts=thread.thread_ts,
            unfurl_links=False,
            unfurl_media=False,
            **message_content(message),
        )
        ts = response.get("ts")
        if isinstance(ts, str):
            self.poster.note(thread, ts)

    async def _upload(self, thread: ThreadRef, step: UploadStep) -> None:
        diff = await self._read_diff(step["task_slug"], step["agent_id"])
        try:
            if diff is None:
                raise DeliveryError("the kept diff is missing", transient=False)
            await self._call(
                self.client.files_upload_v2,
                channel=thread.channel,
                thread_ts=thread.thread_ts,
                filename=step["filename"],
                content=diff.encode("utf-8"),
                title=step["title"],
                initial_comment=step["comment"],
                snippet_type="diff",
            )
        except DeliveryError as exc:
            if exc.transient:
                raise
            logger.warning("uploading %s to %s failed: %s", step["filename"], thread, exc.error)
            await self._post(
                thread,
                f"The diff could not be attached here ({exc.error}). It is kept with the task: "
                f"`harness show {step['task_slug']}` names its file.",
            )

    @staticmethod
    async def _call(method: Callable[..., Awaitable[Any]], **kwargs: Any) -> Any:
        try:
            return await method(**kwargs)
        except (SlackApiError, SlackClientError, aiohttp.ClientError, TimeoutError, OSError) as e:
            raise classify(e) from e
