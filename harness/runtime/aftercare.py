"""What outlives an agent run followed over NATS, kept by ``NatsHosting`` (``Afterwards`` of
``harness/runtime/remote_run.py``):

- kills its worker could not be told (this side or the worker cut off from NATS): delivered
  when the link is back, and tried again until the worker answers, the run is taken off the
  queue, or its outcome is stored (it ended anyway);
- runs recorded interrupted while their worker may still run them (judged lost, or not found
  by a restarted harness): a worker that was only cut off stores the outcome when its link
  comes back, and the listeners get it then (the orchestrator puts it in place of the
  interruption). The run is forgotten only once every listener returned (what it owes for
  the outcome is kept by then): a stop before that leaves it to the next start, which tells
  it again, so listeners take a repeat as one.

Both are kept as long as JetStream keeps a run's events, at most. Once ``resume`` names a
folder, each is also kept there (``harness/spool.py``) until it is done, so a harness
stopped meanwhile, however it stopped, leaves it to the next start: ``resume`` takes up what a
run no longer alive left, and leaves alone what a live harness process keeps.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, TypedDict

from harness.clock import SYSTEM, Clock
from harness.errors import HarnessError
from harness.retry import Backoff
from harness.runtime.nats_link import EVENTS_MAX_AGE_SECONDS, NatsLink, nats_errors
from harness.runtime.spec import RunOutcome
from harness.spool import Spool
from harness.waits import wait_set, within

logger = logging.getLogger(__name__)

LateListener = Callable[[str, str, RunOutcome], Awaitable[None]]
RunAlive = Callable[[str], Awaitable[bool]]

KILL_BACKOFF = Backoff(first=0.5, cap=5.0)  # between rounds of owed kills
LATE_BACKOFF = Backoff(first=1.0, cap=5.0)  # between looks for a lost run's outcome
KILL_TIMEOUT = 2.0  # a worker answers a kill request within milliseconds
KEEP_SECONDS = float(EVENTS_MAX_AGE_SECONDS)

OwedKind = Literal["kill", "outcome"]


class OwedJson(TypedDict):
    kind: OwedKind
    agent_id: str
    task_slug: str
    reason: str
    since: float
    run: str | None


@dataclass(frozen=True)
class Owed:
    """A kill owed to an agent's worker, or an outcome awaited from it."""

    kind: OwedKind
    agent_id: str
    task_slug: str
    reason: str  # a kill's, as its worker is told it
    since: float  # wall-clock seconds since the epoch: it outlives processes
    run: str | None  # the harness run that keeps it (None: any)

    @property
    def name(self) -> str:
        return f"{self.kind}-{self.agent_id}"

    def to_json(self) -> OwedJson:
        return OwedJson(
            kind=self.kind, agent_id=self.agent_id, task_slug=self.task_slug,
            reason=self.reason, since=self.since, run=self.run,
        )  # fmt: skip

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Owed:
        """ValueError when ``data`` is not an entry this module wrote."""
        kind, run = data.get("kind"), data.get("run")
        fields = [data.get(key) for key in ("agent_id", "task_slug", "reason")]
        since = data.get("since")
        if kind not in ("kill", "outcome") or not all(isinstance(f, str) for f in fields):
            raise ValueError("not an owed kill or outcome")
        if not isinstance(since, int | float) or not (run is None or isinstance(run, str)):
            raise ValueError("not an owed kill or outcome")
        agent_id, task_slug, reason = (str(f) for f in fields)
        return cls(kind, agent_id, task_slug, reason, float(since), run)


class Aftercare:
    def __init__(
        self,
        link: Callable[[], NatsLink | None],
        connect: Callable[[], Awaitable[NatsLink]] | None = None,
        clock: Clock = SYSTEM,
    ) -> None:
        self._link = link  # the hosting's link, None while it has none
        self._connect = connect  # makes it (a harness restarted with something owed)
        self._clock = clock
        self._spool: Spool | None = None  # where what is owed is kept, once ``resume`` said
        self._run: str | None = None
        self._kills: dict[str, Owed] = {}  # by agent id
        self._late: dict[str, Owed] = {}  # by agent id: the outcomes awaited
        self._wake = asyncio.Event()
        self._delivering: asyncio.Task[None] | None = None
        self._listeners: list[LateListener] = []
        self._tasks: set[asyncio.Task[None]] = set()

    def on_late_outcome(self, listener: LateListener) -> None:
        """``listener(task_slug, agent_id, outcome)`` for each run recorded interrupted whose
        outcome came in."""
        self._listeners.append(listener)

    @property
    def owed_kills(self) -> list[str]:
        return list(self._kills)

    async def resume(self, folder: Path, run_id: str | None, alive: RunAlive) -> list[Owed]:
        """Keeps what is owed in ``folder`` from now on (as this process's run ``run_id``),
        and takes up what a stopped harness left there: its kills are delivered, its runs
        recorded interrupted watched. What a live run keeps is left to it. What was taken
        up."""
        self._spool, self._run = Spool(folder), run_id
        taken: list[Owed] = []
        for name, data in await self._spool.entries():
            try:
                owed = Owed.from_json(data)
            except ValueError as exc:
                logger.warning("%s in %s skipped: %s", name, folder, exc)
                continue
            if owed.run not in (None, run_id) and await alive(owed.run):
                continue
            taken.append(owed)
        for owed in [*self._kills.values(), *self._late.values()]:  # owed before: kept now
            await self._keep(owed)
        for owed in taken:
            owed = dataclasses.replace(owed, run=run_id)
            if owed.kind == "kill":
                await self._owe_kill(owed)
            else:
                await self._await_late(owed)
        if taken:
            logger.warning("taken up from a stopped harness: %d kill(s) to deliver, %d late "
                           "outcome(s) to await", sum(o.kind == "kill" for o in taken),
                           sum(o.kind == "outcome" for o in taken))  # fmt: skip
        return taken

    async def owe_kill(self, task_slug: str, agent_id: str, reason: str) -> None:
        await self._owe_kill(Owed("kill", agent_id, task_slug, reason, self._wall(), self._run))

    async def await_late_outcome(self, task_slug: str, agent_id: str) -> None:
        await self._await_late(Owed("outcome", agent_id, task_slug, "", self._wall(), self._run))

    def link_back(self) -> None:
        """The link reconnected: owed kills are tried now."""
        self._wake.set()

    async def close(self) -> None:
        """Tries the owed kills once more when the link is up (bounded), then stops; what is
        still owed stays in the folder for the next start."""
        link = self._link()
        if self._kills and link is not None and link.connected:
            with contextlib.suppress(TimeoutError):
                await within(self._kill_round(link), KILL_TIMEOUT * 2)
        later = "; the next start tells it" if self._spool is not None else ""
        for kill in self._kills:
            logger.warning("agent %s: its worker could not be told to stop it%s", kill, later)
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    async def _owe_kill(self, owed: Owed) -> None:
        if owed.agent_id in self._kills:
            return
        self._kills[owed.agent_id] = owed
        await self._keep(owed)
        self._wake.set()
        if self._delivering is None or self._delivering.done():
            self._delivering = self._spawn(self._deliver_kills())

    async def _await_late(self, owed: Owed) -> None:
        if owed.agent_id in self._late:
            return
        self._late[owed.agent_id] = owed
        await self._keep(owed)
        self._spawn(self._watch_late(owed))

    async def _keep(self, owed: Owed) -> None:
        if self._spool is None:
            return
        try:
            await self._spool.put(owed.name, dict(owed.to_json()))
        except (OSError, ValueError) as exc:  # kept by this process only
            logger.warning("agent %s: could not keep its owed %s past a restart: %s",
                           owed.agent_id, owed.kind, exc)  # fmt: skip

    async def _done(self, owed: Owed) -> None:
        if self._spool is not None:
            with contextlib.suppress(ValueError):
                await self._spool.drop(owed.name)

    def _spawn(self, work: Coroutine[Any, Any, None]) -> asyncio.Task[None]:
        task = asyncio.get_running_loop().create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    async def _usable_link(self) -> NatsLink | None:
        """The link when it is up: made first when this process has none yet."""
        link = self._link()
        if link is None and self._connect is not None:
            try:
                link = await self._connect()
            except HarnessError as exc:
                logger.info("owed to workers, waiting for NATS: %s", exc.message)
                return None
        return link if link is not None and link.connected else None

    async def _deliver_kills(self) -> None:
        failures = 0
        while self._kills:
            self._wake.clear()
            link = await self._usable_link()
            if link is not None:
                await self._kill_round(link)
            for agent_id, owed in list(self._kills.items()):
                if self._wall() - owed.since > KEEP_SECONDS:
                    logger.warning("agent %s: its worker was never told to stop it", agent_id)
                    del self._kills[agent_id]
                    await self._done(owed)
            if not self._kills:
                return
            await wait_set(self._wake, KILL_BACKOFF.delay(failures))
            failures = 0 if self._wake.is_set() else failures + 1

    async def _kill_round(self, link: NatsLink) -> None:
        for agent_id, owed in list(self._kills.items()):
            if await self._told(link, agent_id, owed.reason):
                self._kills.pop(agent_id, None)
                await self._done(owed)

    async def _told(self, link: NatsLink, agent_id: str, reason: str) -> bool:
        """Whether the agent is stopped now: its worker told (it answered), its run taken off
        the queue before any worker had it, or its outcome stored (it ended anyway)."""
        s = link.subjects
        if await link.stored_outcome(agent_id) is not None:
            return True
        with contextlib.suppress(*nats_errors()):  # not queued (any more)
            queued = await link.js.get_last_msg(s.runs_stream, s.run(agent_id))
            if queued.seq is not None and await link.js.delete_msg(s.runs_stream, queued.seq):
                logger.info("agent %s: taken off the queue, as asked while NATS was away", agent_id)
                return True
        try:
            await link.nc.request(s.kill(agent_id), reason.encode("utf-8"), timeout=KILL_TIMEOUT)
        except nats_errors() as exc:  # its worker still away: tried again later
            logger.debug("agent %s: its worker cannot be told to stop yet: %s", agent_id, exc)
            return False
        logger.info("agent %s: its worker was told to stop it (asked while it could not be "
                    "reached)", agent_id)  # fmt: skip
        return True

    async def _watch_late(self, owed: Owed) -> None:
        agent_id = owed.agent_id
        try:
            for delay in LATE_BACKOFF.delays():
                if self._wall() - owed.since > KEEP_SECONDS:
                    await self._done(owed)
                    return
                await asyncio.sleep(delay)
                link = await self._usable_link()
                if link is None:
                    continue
                outcome = await link.stored_outcome(agent_id)
                if outcome is not None:
                    logger.warning("agent %s, recorded interrupted, %s after all", agent_id,
                                   outcome.status)  # fmt: skip
                    told = [await self._tell(listener, owed.task_slug, agent_id, outcome)
                            for listener in self._listeners]  # fmt: skip
                    if all(told):  # else kept: the next start tells it again
                        await self._done(owed)
                    return
        finally:
            self._late.pop(agent_id, None)

    async def _tell(
        self, listener: LateListener, task_slug: str, agent_id: str, outcome: RunOutcome
    ) -> bool:
        """Whether ``listener`` took the outcome (it returns once what it owes is kept)."""
        try:
            await listener(task_slug, agent_id, outcome)
        except Exception:  # top of a background task: one listener's failure is logged
            logger.exception("a late outcome's listener failed for agent %s", agent_id)
            return False
        return True

    def _wall(self) -> float:
        return self._clock.now().timestamp()
