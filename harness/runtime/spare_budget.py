"""What a host's idle spares may hold, across its pools (``spares.py``, ``follow_up_spares.py``):
none starts while agents queue for a slot (a spare's start costs the CPU the queued agents
need, and the next request would find a slot taken, not a spare); at most ``max_idle`` idle
or starting; at most ``max_memory_mb`` resident in all, measured from /proc (the newest
idle spare closes when they are over it)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Protocol

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


class SpareBudget:
    def __init__(self) -> None:
        self.limits = SpareLimits()
        self.busy: Callable[[], bool] = _never_busy
        self._pools: list[IdleSpares] = []
        self.largest = FIRST_ESTIMATE  # the most one idle spare was seen to hold
        self._measured = False
        self.trimmed = 0  # idle spares closed for memory

    def add(self, pool: IdleSpares) -> None:
        self._pools.append(pool)

    def set(self, limits: SpareLimits | None, busy: Callable[[], bool] | None) -> None:
        self.limits = limits or SpareLimits()
        self.busy = busy or _never_busy

    def idle(self) -> int:
        return sum(pool.idle_count() for pool in self._pools)

    def quiet(self, *, counted: int = 0) -> bool:
        """Whether a spare may start as far as the load goes (no agent queues), and the
        count allows one more (``counted``: the caller's spare is among the idle already)."""
        if self.busy():
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
