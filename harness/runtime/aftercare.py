"""What outlives an agent run followed over NATS, kept by ``NatsHosting`` (``Afterwards`` of
``harness/runtime/remote_run.py``):

- kills its worker could not be told (this side or the worker cut off from NATS): delivered
  when the link is back, and tried again until the worker answers, the run is taken off the
  queue, or its outcome is stored (it ended anyway);
- runs judged lost (their worker silent too long): a worker that was only cut off stores the
  outcome when its link comes back, and the listeners get it then, once (the orchestrator
  puts it in place of the interruption).

Both are kept as long as JetStream keeps a run's events, at most.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

from harness.retry import Backoff
from harness.runtime.nats_link import EVENTS_MAX_AGE_SECONDS, NatsLink, nats_errors
from harness.runtime.spec import RunOutcome

logger = logging.getLogger(__name__)

LateListener = Callable[[str, str, RunOutcome], Awaitable[None]]

KILL_BACKOFF = Backoff(first=0.5, cap=5.0)  # between rounds of owed kills
LATE_BACKOFF = Backoff(first=1.0, cap=5.0)  # between looks for a lost run's outcome
KILL_TIMEOUT = 2.0  # a worker answers a kill request within milliseconds
KEEP_SECONDS = float(EVENTS_MAX_AGE_SECONDS)


class Aftercare:
    def __init__(self, link: Callable[[], NatsLink | None]) -> None:
        self._link = link  # the hosting's link, None while it has none
        self._kills: dict[str, tuple[str, float]] = {}  # agent id -> (reason, owed since)
        self._wake = asyncio.Event()
        self._delivering: asyncio.Task[None] | None = None
        self._awaited: set[str] = set()
        self._listeners: list[LateListener] = []
        self._tasks: set[asyncio.Task[None]] = set()

    def on_late_outcome(self, listener: LateListener) -> None:
        """``listener(task_slug, agent_id, outcome)`` for each run judged lost whose outcome
        came in."""
        self._listeners.append(listener)

    @property
    def owed_kills(self) -> list[str]:
        return list(self._kills)

    def owe_kill(self, agent_id: str, reason: str) -> None:
        self._kills.setdefault(agent_id, (reason, _now()))
        self._wake.set()
        if self._delivering is None or self._delivering.done():
            self._delivering = self._spawn(self._deliver_kills())

    def await_late_outcome(self, task_slug: str, agent_id: str) -> None:
        if agent_id not in self._awaited:
            self._awaited.add(agent_id)
            self._spawn(self._await_late(task_slug, agent_id))

    def link_back(self) -> None:
        """The link reconnected: owed kills are tried now."""
        self._wake.set()

    async def close(self) -> None:
        """Tries the owed kills once more when the link is up (bounded), then stops."""
        link = self._link()
        if self._kills and link is not None and link.connected:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._kill_round(link), KILL_TIMEOUT * 2)
        for kill in self._kills:
            logger.warning("agent %s: its worker could not be told to stop it", kill)
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    def _spawn(self, work: Coroutine[Any, Any, None]) -> asyncio.Task[None]:
        task = asyncio.get_running_loop().create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    async def _deliver_kills(self) -> None:
        failures = 0
        while self._kills:
            self._wake.clear()
            link = self._link()
            if link is not None and link.connected:
                await self._kill_round(link)
            for agent_id, (_reason, since) in list(self._kills.items()):
                if _now() - since > KEEP_SECONDS:
                    logger.warning("agent %s: its worker was never told to stop it", agent_id)
                    del self._kills[agent_id]
            if not self._kills:
                return
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), KILL_BACKOFF.delay(failures))
            failures = 0 if self._wake.is_set() else failures + 1

    async def _kill_round(self, link: NatsLink) -> None:
        for agent_id, (reason, _since) in list(self._kills.items()):
            if await self._told(link, agent_id, reason):
                self._kills.pop(agent_id, None)

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

    async def _await_late(self, task_slug: str, agent_id: str) -> None:
        since = _now()
        try:
            for delay in LATE_BACKOFF.delays():
                if _now() - since > KEEP_SECONDS:
                    return
                await asyncio.sleep(delay)
                link = self._link()
                if link is None or not link.connected:
                    continue
                outcome = await link.stored_outcome(agent_id)
                if outcome is not None:
                    logger.warning("agent %s, judged lost, %s after all", agent_id, outcome.status)
                    for listener in self._listeners:
                        await self._tell(listener, task_slug, agent_id, outcome)
                    return
        finally:
            self._awaited.discard(agent_id)

    async def _tell(
        self, listener: LateListener, task_slug: str, agent_id: str, outcome: RunOutcome
    ) -> None:
        try:
            await listener(task_slug, agent_id, outcome)
        except Exception:  # top of a background task: one listener's failure is logged
            logger.exception("a late outcome's listener failed for agent %s", agent_id)


def _now() -> float:
    return asyncio.get_running_loop().time()
