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

from prometheus_client import Gauge
from slack_sdk.web.async_client import AsyncWebClient

from bot.backlog import Backlog
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
from bot.poster import DeliveryError, Poster
from bot.slack_steps import SlackSteps
from harness.clock import Clock
from harness.retry import Backoff
from harness.tasks.ledger import Ledger, LedgerClaimLostError, LedgerUnwritableError, Owed
from harness.tasks.model import ThreadRef
from harness.waits import stop_task, wait_set

logger = logging.getLogger(__name__)

# The step types are the outbox's vocabulary: its users name them from here.
__all__ = ["AgentRef", "DeleteStep", "Entry", "Held", "Outbox", "PostStep", "ReactStep",
           "Step", "StopStreamStep", "UpdateStep", "UploadStep", "backoff", "lane_of"]  # fmt: skip

_LANES = 8  # threads delivered at once
# A ledger other replicas share is read again this often while nothing is due here: what a
# replica that died owed comes due once its claim on the thread expires.
POLL = Backoff(first=0.25, cap=2.0)
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
        self._steps = SlackSteps(client, poster, read_diff)
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
        # Entries under way (set once the attempt ends), and those taken out of delivery by
        # ``withdraw`` (for good once an entry took their place).
        self._busy: dict[int, asyncio.Event] = {}
        self._withdrawn: set[int] = set()
        self._replaced: set[int] = set()

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
        claims: str | None = None,
        replaces: Owed | None = None,
    ) -> bool:
        """Stores what the thread is owed (ending the watch of agent ``settles``, and the
        request ``handles``, with it), then has it delivered. Its posts carry ``key`` (unique
        by default); ``recheck``: each is looked for in the thread before it is made.
        ``claims``: owed only by the first to claim that ledger key (claimed in the same
        step, so a stop cannot leave it claimed and not owed); False when it was before.
        ``replaces``: an entry ``withdraw`` took out, which goes in the same step (either
        way: it was owed already if not now)."""
        entry: Entry = {"thread": [thread.channel, thread.thread_ts], "steps": list(steps),
                        "key": key or uuid.uuid4().hex}  # fmt: skip
        if recheck:  # it may have been posted before: its posts are looked for first
            entry["recheck"] = True
        if agent is not None:
            entry["agent"] = agent
        lane = lane_of(thread)
        if claims is not None and self.backlog.claimed_here(claims):
            await self._drop_replaced(replaces, written=False)
            return False
        drops = [replaces.id] if replaces is not None and replaces.id > 0 else []
        try:
            if len(self.backlog):  # older writes first: this one would overtake them
                raise LedgerUnwritableError("older ledger writes wait")
            stored = await self.ledger.owe_once(claims, lane, dict(entry), settles=settles,
                                                handles=handles, drops=drops)  # fmt: skip
            await self._drop_replaced(replaces, written=True)
            if stored is None:
                return False
        except LedgerUnwritableError:
            if claims is not None:  # noted once the disk takes it, with the rest kept
                self.backlog.claim_later(claims)
            await self._drop_replaced(replaces, written=False)
            owed = Owed(self._next_held, lane, dict(entry), 0, 0, self._now(), None)
            self._next_held -= 1
            self._held[owed.id] = Held(owed, settles, handles)
        if self._undelivered is not None:
            self._undelivered.inc()
        self._idle.clear()
        self._wake.set()
        return True

    async def withdraw(self, key: str) -> Owed | None:
        """Takes the entry whose posts carry ``key`` out of delivery, if none of its steps
        was made yet (its first may have been tried, its answer lost), waiting for an
        attempt under way to end; None when there is no such entry (delivered, begun, or
        never owed). The caller owes what takes its place (``owe(..., replaces=)``), or
        puts it back (``release``)."""
        while True:
            found = await self._find(lambda owed: owed.data.get("key") == key
                                     and owed.id not in self._withdrawn)  # fmt: skip
            if found is None or found.step > 0:
                return None
            if (busy := self._busy.get(found.id)) is None:
                # Out of delivery from here; read again, as an attempt may have ended meanwhile.
                entry_id = found.id
                self._withdrawn.add(entry_id)
                now = await self._find(partial(_has_id, entry_id))
                if now is not None and now.step == 0 and entry_id not in self._busy:
                    return now
                self._withdrawn.discard(entry_id)
                if (busy := self._busy.get(entry_id)) is None:
                    return None
            await busy.wait()

    async def _find(self, match: Callable[[Owed], bool]) -> Owed | None:
        """The first entry still owed that ``match``es, as far as it got."""
        try:
            stored = await self.ledger.pending()
        except LedgerUnwritableError:
            stored = []
        entries = [self._newer.get(owed.id, owed) for owed in stored]
        entries += [held.owed for held in self._held.values()]
        return next((owed for owed in entries if owed is not None and match(owed)), None)

    def release(self, withdrawn: Owed) -> None:
        """Puts back an entry ``withdraw`` took out that nothing replaced."""
        if withdrawn.id in self._withdrawn and withdrawn.id not in self._replaced:
            self._withdrawn.discard(withdrawn.id)
            self._wake.set()

    async def _drop_replaced(self, replaced: Owed | None, *, written: bool) -> None:
        """The entry ``replaced`` is done with (``written``: the ledger dropped it already)."""
        if replaced is None:
            return
        self._replaced.add(replaced.id)
        if self._undelivered is not None:
            self._undelivered.dec()
        if replaced.id < 0 or not written:
            try:
                await self._progress(replaced, None, partial(self.ledger.delivered, replaced.id))
            except LedgerClaimLostError as exc:  # another replica delivers the thread now
                self._newer.pop(replaced.id, None)
                logger.info("a withdrawn entry is another replica's now: %s", exc)

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run(), name="outbox")

    async def stop(self, timeout: float) -> None:
        """Delivers what it can within ``timeout`` s; the rest waits in the ledger for the
        next start."""
        if self._task is not None:
            self._wake.set()
            await wait_set(self._idle, timeout)
            await stop_task(self._task)
            self._task = None
        await self.backlog.close()
        await self._keep_held()

    async def settled(self, timeout: float) -> None:
        """Waits until nothing is due (tests, shutdown)."""
        self._wake.set()
        if not await wait_set(self._idle, timeout):
            raise TimeoutError(f"the outbox still had work after {timeout} s")

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
        quiet = 0  # passes in a row with nothing owed here
        while True:
            self._wake.clear()
            try:
                wait = await self.deliver_due()
            except Exception:  # the loop must outlive one bad pass (e.g. the disk)
                logger.exception("the outbox failed to deliver; trying again shortly")
                wait = self.max_delay
            if wait is None and not self._wake.is_set():
                self._idle.set()
            if self.ledger.shared:  # another replica's entries come due here if it dies
                quiet = quiet + 1 if wait is None else 0
                wait = min(wait if wait is not None else self.max_delay, POLL.delay(quiet))
            await wait_set(self._wake, wait)

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
            if owed.id in self._withdrawn:
                continue  # what replaces it comes after it in the lane
            now = self._now()
            if owed.due > now:
                return owed.due - now  # a later entry of the thread waits for this one
            self._busy[owed.id] = busy = asyncio.Event()
            try:
                outcome = await self._deliver(owed)
            except LedgerClaimLostError as exc:
                # Another replica took the thread over (this one was too slow to renew its
                # claim): its entries are that replica's to finish, which looks for the posts
                # made here before it makes them again.
                logger.info("thread %s is delivered by another replica now: %s", owed.lane, exc)
                for entry in entries:
                    self._newer.pop(entry.id, None)
                return None
            finally:
                del self._busy[owed.id]
                busy.set()
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
                await self._steps.do(thread, steps[index], key, retried)
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


def _has_id(entry_id: int, owed: Owed) -> bool:
    return owed.id == entry_id
