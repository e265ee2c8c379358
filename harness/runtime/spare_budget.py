"""What a host's idle spares may hold, across its pools (``spares.py``, ``follow_up_spares.py``):
none starts while agents queue for a slot (a spare's start costs the CPU the queued agents
need, and the next request would find a slot taken, not a spare), nor until the queue has
stayed empty for ``settle_seconds`` (a burst's tail); at most ``max_idle`` idle or
starting; at most ``max_memory_mb`` resident in all, measured from /proc (the newest idle
spare closes when they are over it)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Protocol

from harness.clock import SYSTEM, Clock
from harness.runtime.spare_health import resident_bytes
from harness.runtime.spec import SpareLimits

logger = logging.getLogger(__name__)

MB = 1024 * 1024
# What one idle spare holds before any was measured here (``bench/RESULTS.md``: ~200 MB).
FIRST_ESTIMATE = 250 * MB


class IdleSpares(Protocol):
    """A pool of spares, as its budget sees it."""

    def idle_count(self) -> int:
        """Spares ready or starting."""
        ...

    def idle_pids(self) -> list[tuple[int, int | None]]:
        """Each ready spare's (order made, CLI process id)."""
        ...

    def give_up(self, order: int) -> bool:
        """Closes the ready spare made ``order``-th; whether it was this pool's."""
        ...


def _never_busy() -> bool:
    return False


def settle_left(last_busy: float | None, now: float, settle_seconds: float) -> float:
    """Seconds before a spare may start, agents having last been seen queueing at
    ``last_busy`` (monotonic; None: never): 0 once the queue stayed empty ``settle_seconds``."""
    if last_busy is None:
        return 0.0
    return max(0.0, last_busy + settle_seconds - now)


class SpareBudget:
    def __init__(self, clock: Clock = SYSTEM) -> None:
        self.limits = SpareLimits()
        self.busy: Callable[[], bool] = _never_busy
        self._clock = clock
        self._last_busy: float | None = None  # when agents were last seen queueing
        self._pools: list[IdleSpares] = []
        self.largest = FIRST_ESTIMATE  # the most one idle spare was seen to hold
        self._measured = False
        self.trimmed = 0  # idle spares closed for memory

    def add(self, pool: IdleSpares) -> None:
        self._pools.append(pool)

    def set(self, limits: SpareLimits | None, busy: Callable[[], bool] | None) -> None:
        self.limits = limits or SpareLimits()
        self.busy = busy or _never_busy

    def settling(self) -> float:
        """Seconds before the load lets a spare start: ``settle_seconds`` while agents
        queue, less since they last did, 0 when they have not for that long. Every look
        at the load (each agent's end nudges the pools) notes a queue seen."""
        now = self._clock.monotonic()
        if self.busy():
            self._last_busy = now
        return settle_left(self._last_busy, now, self.limits.settle_seconds)

    def idle(self) -> int:
        return sum(pool.idle_count() for pool in self._pools)

    def quiet(self, *, counted: int = 0) -> bool:
        """Whether a spare may start as far as the load goes (no agent queues, nor did
        within the settling time), and the count allows one more (``counted``: the caller's
        spare is among the idle already)."""
        if self.settling() > 0 or self.busy():  # busy: with no settling time configured
            return False
        cap = self.limits.max_idle
        return cap is None or self.idle() - counted < cap

    async def room(self, *, counted: int = 0) -> bool:
        """Whether one more spare may start now: ``quiet``, and within the memory cap
        with one more of the largest seen."""
        if not self.quiet(counted=counted):
            return False
        cap = self.limits.max_memory_mb
        if cap is None:
            return True
        held = await self._resident()
        starting = self.idle() - counted - sum(len(pool.idle_pids()) for pool in self._pools)
        return held + (starting + 1) * self.largest <= cap * MB

    async def trim(self) -> None:
        """Closes the newest idle spares while they hold more than the memory cap."""
        cap = self.limits.max_memory_mb
        if cap is None:
            return
        while True:
            measured = await asyncio.to_thread(self._measure)
            if sum(size for _, size in measured) <= cap * MB or not measured:
                return
            newest = max(order for order, _ in measured)
            if not any(pool.give_up(newest) for pool in self._pools):
                return
            self.trimmed += 1
            logger.info("an idle spare closed: idle spares held more than %d MB", cap)

    async def _resident(self) -> int:
        return sum(size for _, size in await asyncio.to_thread(self._measure))

    def _measure(self) -> list[tuple[int, int]]:
        """Each ready spare's (order, resident bytes of its process tree) (blocking)."""
        found = [
            (order, resident_bytes(pid)) for pool in self._pools for order, pid in pool.idle_pids()
        ]
        sizes = [size for _, size in found if size > 0]
        if sizes:  # learnt: the estimate gives way to what was measured
            self.largest = max(sizes) if not self._measured else max(self.largest, *sizes)
            self._measured = True
        return found


class WhenSettled:
    """Calls ``start`` when the load lets spares start: at once when it does, else at the
    end of the settling time (one timer, armed again at each ``nudge``); never while agents
    queue, whose ends nudge again. For a pool whose spares wait for a burst to pass."""

    def __init__(self, budget: SpareBudget, start: Callable[[], None]) -> None:
        self._budget = budget
        self._start = start
        self._wake: asyncio.TimerHandle | None = None

    def nudge(self) -> None:
        """The load changed (an agent started or ended)."""
        if self._budget.quiet():
            self.cancel()
            self._start()
        elif not self._budget.busy() and (left := self._budget.settling()) > 0:
            self.cancel()
            self._wake = asyncio.get_running_loop().call_later(left, self._woken)

    def _woken(self) -> None:
        self._wake = None
        self.nudge()

    def cancel(self) -> None:
        if self._wake is not None:
            self._wake.cancel()
            self._wake = None
