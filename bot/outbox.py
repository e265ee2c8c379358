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

A ledger that cannot be written (its disk is full) loses nothing and holds nothing up: an
entry it refuses is *held* in memory and delivered from there, and a step whose progress it
refuses is remembered in memory (never repeated) while ``bot.backlog`` writes it later. A held
entry's watch and request are ended once it is delivered and the disk takes writes again;
until then they stay, so a bot stopped meanwhile settles them at its next start.

Each post carries a key (the entry's, and the number of the message in it) in its metadata:
a retry after an answer that never came looks for the key in the thread first, so a post
Slack made but whose answer was lost is not made twice; so does an entry owed again by a
later start that may have been delivered before (``recheck``).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import uuid
from collections.abc import Awaitable, Callable, Sequence
from functools import partial
from typing import Any

import aiohttp
from prometheus_client import Gauge
from slack_sdk.errors import SlackApiError, SlackClientError
from slack_sdk.web.async_client import AsyncWebClient

from bot.backlog import Backlog
from bot.blocks import SlackMessage
from bot.outbox_steps import (
    AgentRef,
    DeleteStep,
    Entry,
    Held,
    PostStep,
    ReactStep,
    Step,
    StopStreamStep,
    UpdateStep,
    UploadStep,
)
from bot.poster import DeliveryError, Poster, classify, message_content, post_keyed
from harness.clock import Clock
from harness.retry import Backoff
from harness.tasks.ledger import Ledger, LedgerUnwritableError, Owed
from harness.tasks.model import ThreadRef

logger = logging.getLogger(__name__)

# The step types are the outbox's vocabulary: its users name them from here.
__all__ = ["AgentRef", "DeleteStep", "Entry", "Held", "Outbox", "PostStep", "ReactStep",
           "Step", "StopStreamStep", "UpdateStep", "UploadStep", "backoff", "lane_of"]  # fmt: skip

# A status message that is gone or can no longer be edited: post the result instead.
_MESSAGE_GONE = frozenset({"message_not_found", "cant_update_message", "edit_window_closed"})
_LANES = 8  # threads delivered at once
_MESSAGE_STEPS = ("post", "update", "stop_stream")  # the steps that show a message


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
        backlog: Backlog | None = None,
    ) -> None:
        self.ledger = ledger
        self.backlog = backlog or Backlog(ledger)
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
        # Entries the ledger refused (negative ids), and the progress of stored entries newer
        # than the ledger's (None: done with), until the backlog writes it.
        self._held: dict[int, Held] = {}
        self._newer: dict[int, Owed | None] = {}
        self._next_held = -1

    async def owe(
        self,
        thread: ThreadRef,
        steps: Sequence[Step],
        *,
        agent: AgentRef | None = None,
        settles: str | None = None,
        handles: str | None = None,
        key: str | None = None,
        recheck: bool = False,
    ) -> None:
        """Stores what the thread is owed (ending the watch of agent ``settles``, and the
        request ``handles``, with it), then has it delivered. Its posts carry ``key`` (unique
        by default); ``recheck``: each is looked for in the thread before it is made."""
        entry: Entry = {"thread": [thread.channel, thread.thread_ts], "steps": list(steps),
                        "key": key or uuid.uuid4().hex}  # fmt: skip
        if recheck:  # it may have been posted before: its posts are looked for first
            entry["recheck"] = True
        if agent is not None:
            entry["agent"] = agent
        lane = lane_of(thread)
        try:
            if len(self.backlog):  # older writes first: this one would overtake them
                raise LedgerUnwritableError("older ledger writes wait")
            await self.ledger.owe(lane, dict(entry), settles=settles, handles=handles)
        except LedgerUnwritableError:
            owed = Owed(self._next_held, lane, dict(entry), 0, 0, self._now(), None)
            self._next_held -= 1
            self._held[owed.id] = Held(owed, settles, handles)
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
        if self._task is not None:
            self._wake.set()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._idle.wait(), timeout)
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        await self.backlog.close()
        await self._keep_held()

    async def settled(self, timeout: float) -> None:
        """Waits until nothing is due (tests, shutdown)."""
        self._wake.set()
        await asyncio.wait_for(self._idle.wait(), timeout)

    async def _keep_held(self) -> None:
        """At a stop: entries still held go to the ledger if it takes them now (else their
        watches and requests, kept there, settle them at the next start)."""
        for held in list(self._held.values()):
            owed = held.owed
            with contextlib.suppress(LedgerUnwritableError):
                stored = await self.ledger.owe(owed.lane, owed.data, settles=held.settles,
                                               handles=held.handles)  # fmt: skip
                del self._held[owed.id]
                if owed.step:
                    await self.ledger.advance(stored, owed.step)

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
        try:
            stored = await self.ledger.pending()
        except LedgerUnwritableError:  # unreadable for now: what is held still goes out
            stored = []
        pending: list[Owed] = []
        for owed in stored:
            newer = self._newer.get(owed.id, owed)
            if newer is not None:
                pending.append(newer)
        pending += [held.owed for held in self._held.values()]
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
            # A step tried before may have been made with its answer lost: looked for first.
            # Its key counts the entry's messages, not steps: a status message edited in
            # place by one delivery and replaced by a post in another is the same message.
            shown = sum(1 for step in steps[:index] if step["op"] in _MESSAGE_STEPS)
            key = f"{entry.get('key') or owed.id}.{shown}"
            retried = (owed.attempts > 0 and index == owed.step) or bool(entry.get("recheck"))
            try:
                await self._do(thread, steps[index], key, retried)
            except DeliveryError as exc:
                if not exc.transient:
                    logger.warning("delivery to %s given up: %s", channel, exc.error)
                    gave_up = partial(self.ledger.give_up, owed.id, exc.error)
                    await self._progress(owed, None, gave_up)
                    agent = entry.get("agent")
                    if agent is not None:
                        await self._on_given_up(agent, exc.error)
                    return None
                delay = backoff(owed.attempts, self.max_delay)
                logger.warning(
                    "delivery to %s failed (%s); retrying in %.1f s", channel, exc, delay
                )
                later = dataclasses.replace(owed, step=index, attempts=owed.attempts + 1,
                                            due=self._now() + delay, error=exc.error)  # fmt: skip
                await self._progress(owed, later, partial(self._postpone, owed, later))
                return delay
            if index + 1 < len(steps):
                advanced = partial(self.ledger.advance, owed.id, index + 1)
                owed = await self._progress(
                    owed, dataclasses.replace(owed, step=index + 1), advanced
                )
        await self._progress(owed, None, partial(self.ledger.delivered, owed.id))
        return None

    async def _postpone(self, owed: Owed, later: Owed) -> None:
        if later.step > owed.step:
            await self.ledger.advance(owed.id, later.step)
        await self.ledger.postpone(owed.id, later.due, later.error or "")

    async def _progress(
        self, owed: Owed, newer: Owed | None, write: Callable[[], Awaitable[None]]
    ) -> Owed:
        """Records how far ``owed`` got (``newer``; None: done with): in memory for a held
        entry, else in the ledger, or in memory until the backlog writes it there."""
        if owed.id < 0:
            held = self._held.get(owed.id)
            if held is not None and newer is not None:
                self._held[owed.id] = dataclasses.replace(held, owed=newer)
            elif held is not None:
                del self._held[owed.id]
                if held.settles is not None:
                    await self.backlog.write(partial(self.ledger.unwatch, held.settles), "unwatch")
                if held.handles is not None:
                    await self.backlog.write(partial(self.ledger.handled, held.handles), "handled")
            return newer or owed
        self._newer[owed.id] = newer

        def written() -> None:
            if owed.id in self._newer and self._newer[owed.id] is newer:
                del self._newer[owed.id]

        await self.backlog.write(write, f"outbox entry {owed.id}", done=written)
        return newer or owed

    # ------------------------------------------------------------------ steps

    async def _do(self, thread: ThreadRef, step: Step, key: str, retried: bool) -> None:
        """One step; a post carries ``key``, looked for in the thread first when ``retried``."""
        if step["op"] == "post":
            await self._post(thread, step["message"], key, retried)
        elif step["op"] == "update":
            await self._update(thread, step["ts"], step["message"], key, retried)
        elif step["op"] == "stop_stream":
            try:
                await self._call(self.client.chat_stopStream, channel=thread.channel,
                                 ts=step["ts"], blocks=step["message"]["blocks"],
                                 session_status=step.get("session_status"))  # fmt: skip
            except DeliveryError as exc:
                if exc.transient:
                    raise
                logger.info("stream %s not stopped (%s): edited instead", step["ts"], exc.error)
                await self._update(thread, step["ts"], step["message"], key, retried)
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
            removing = step.get("remove", False)
            try:
                await self._call(
                    self.client.reactions_remove if removing else self.client.reactions_add,
                    channel=step["channel"],
                    timestamp=step["ts"],
                    name=step["name"],
                )
            except DeliveryError as exc:
                if exc.transient:
                    raise
                # Already there (or already gone), or the message is gone: nothing is owed.
                logger.info("reaction :%s: not %s: %s", step["name"],
                            "removed" if removing else "added", exc.error)  # fmt: skip
        else:
            await self._upload(thread, step, key, retried)

    async def _update(
        self, thread: ThreadRef, ts: str, message: SlackMessage | str, key: str, retried: bool
    ) -> None:
        try:
            await self._call(self.client.chat_update, channel=thread.channel, ts=ts,
                             **message_content(message))  # fmt: skip
        except DeliveryError as exc:
            if exc.transient or exc.error not in _MESSAGE_GONE:
                raise
            await self._post(thread, message, key, retried)

    async def _post(
        self, thread: ThreadRef, message: SlackMessage | str, key: str, retried: bool
    ) -> None:
        response = await self._call(
            post_keyed, self.client, thread, message, key=key, look_first=retried
        )
        ts = response.get("ts")
        if isinstance(ts, str):
            self.poster.note(thread, ts)

    async def _upload(self, thread: ThreadRef, step: UploadStep, key: str, retried: bool) -> None:
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
                key,
                retried,
            )

    @staticmethod
    async def _call(method: Callable[..., Awaitable[Any]], *args: Any, **kwargs: Any) -> Any:
        try:
            return await method(*args, **kwargs)
        except (SlackApiError, SlackClientError, aiohttp.ClientError, TimeoutError, OSError) as e:
            raise classify(e) from e
