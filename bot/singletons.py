"""Work one bot replica does at a time (following pull requests' checks, taking over what a
stopped replica left running), each under a lease: started on the replica that holds it,
stopped when it loses it, and taken up within seconds by another when its holder dies.

Every replica contends for every lease: a free one is taken at start, and one whose holder
stopped renewing it is taken over once its ``ttl`` ran out (``LeaseKeeper`` renews the held
ones every third of it). With the file store the leases are this process's (``LocalLeases``):
each job starts at once, as with one process.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from functools import partial
from typing import Any

from prometheus_client import Gauge

from harness.errors import HarnessError
from harness.metrics import Metrics
from harness.retry import Backoff
from harness.tasks.leases import LeaseKeeper
from harness.waits import stop_task, wait_set

logger = logging.getLogger(__name__)

TTL = 6.0  # seconds a lease outlives its holder's last renewal (renewed every 2 s)
# A replica without a lease looks again this often; a failing NATS server less often, but
# at least once a ttl: after a long outage the singletons are back within seconds of NATS.
CONTEND = Backoff(first=TTL / 3, cap=TTL / 3)
UNREACHABLE = Backoff(first=TTL / 3, cap=TTL)


@dataclass(frozen=True)
class Singleton:
    name: str  # the lease's
    start: Callable[[], Coroutine[Any, Any, None]]
    stop: Callable[[], Coroutine[Any, Any, None]]


class Singletons:
    def __init__(self, keeper: LeaseKeeper, *, ttl: float = TTL) -> None:
        self.keeper = keeper
        self.ttl = ttl
        self._jobs: dict[str, Singleton] = {}
        self._running: set[str] = set()
        self._loop: asyncio.Task[None] | None = None
        self._stopping: set[asyncio.Task[None]] = set()
        self._lost = asyncio.Event()

    def running(self) -> list[str]:
        """The jobs running on this replica now."""
        return sorted(self._running)

    def add(self, job: Singleton) -> None:
        self._jobs[job.name] = job

    def metrics(self, metrics: Metrics) -> None:
        """``harness_leases_held{lease}``: 1 for each lease this replica holds now."""
        held = Gauge("harness_leases_held", "Leases this replica holds (1) or not (0)",
                     ["lease"], registry=metrics.registry)  # fmt: skip
        for name in self._jobs:
            held.labels(name).set_function(partial(self._holds, name))

    def _holds(self, name: str) -> float:
        return float(name in self.keeper.held())

    async def start(self) -> None:
        """Starts the jobs whose leases this replica takes now, then keeps contending."""
        await self._contend()
        self._loop = asyncio.get_running_loop().create_task(self._contending(), name="leases")

    async def _contending(self) -> None:
        failures = 0
        while True:
            self._lost.clear()
            wait = CONTEND.delay(0) if not failures else UNREACHABLE.delay(failures)
            await wait_set(self._lost, wait)
            try:
                failures = 0 if await self._contend() else failures + 1
            except Exception:  # the top of the leases' loop: it must go on contending
                logger.exception("contending for the singletons' leases failed")

    async def _contend(self) -> bool:
        """Takes each free lease and starts its job; False when the leases are out of reach."""
        reached = True
        for name, job in self._jobs.items():
            if name in self._running:
                continue
            try:
                held = await self.keeper.hold(name, self.ttl, self._on_lost)
            except HarnessError as exc:
                logger.warning("could not take the lease %s: %s", name, exc.message)
                reached = False
                continue
            if held:
                logger.info("this replica holds the lease %s: %s starts here", name, name)
                self._running.add(name)
                await job.start()
        return reached

    def _on_lost(self, name: str) -> None:
        """Another replica holds ``name`` now: its job stops here."""
        self._lost.set()
        if name not in self._running:
            return
        self._running.discard(name)
        logger.warning("the lease %s was lost: %s stops here", name, name)
        stopping = asyncio.get_running_loop().create_task(self._jobs[name].stop())
        self._stopping.add(stopping)
        stopping.add_done_callback(self._stopping.discard)

    async def close(self) -> None:
        """Stops the jobs and releases their leases (another replica takes them at once)."""
        if self._loop is not None:
            await stop_task(self._loop)
            self._loop = None
        for name in list(self._running):
            self._running.discard(name)
            await self._jobs[name].stop()
        await asyncio.gather(*self._stopping, return_exceptions=True)
        await self.keeper.close()
