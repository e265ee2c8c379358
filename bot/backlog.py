"""Ledger writes the disk refused, kept in memory in order and tried again until it takes
them (a full disk that is freed, say).

While anything waits here, later writes queue behind it rather than go first: a watch that
is ended must never be written back by an older write that comes late. Whoever waits for the
ledger to take writes again (``when_writable``: requests that could not be recorded) is told
once everything kept has been written. Nothing here raises to its caller: a write either
happened or is kept.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from functools import partial

from harness.retry import Backoff
from harness.tasks.ledger import Ledger, LedgerClaimLostError, LedgerUnwritableError
from harness.waits import stop_task, wait_set

logger = logging.getLogger(__name__)

Write = Callable[[], Awaitable[object]]
# A full disk is tried again soon, then every few seconds: it is cheap, and people wait.
RETRY = Backoff(first=0.25, cap=5.0)


@dataclass(frozen=True)
class _Kept:
    name: str
    write: Write
    done: Callable[[], None] | None


class Backlog:
    def __init__(self, ledger: Ledger, *, backoff: Backoff = RETRY) -> None:
        self.ledger = ledger
        self._backoff = backoff
        self._kept: list[_Kept] = []
        self._waiting: list[Callable[[], None]] = []
        self._claimed: set[str] = set()  # claimed while the disk refused to note it
        self._task: asyncio.Task[None] | None = None
        self._wake = asyncio.Event()
        # Probes in a row with nothing else written: a request deferred again at once (its
        # write bigger than the probe's) waits longer each time rather than spin.
        self._probes = 0

    def __len__(self) -> int:
        return len(self._kept)

    @property
    def problem(self) -> str | None:
        """Why the ledger takes no writes now (None while it does)."""
        return self.ledger.problem

    async def write(
        self, write: Write, name: str, *, done: Callable[[], None] | None = None
    ) -> bool:
        """Writes now, or keeps the write for later when the disk refuses it (or older
        writes still wait): True when written now. ``done`` runs once it is written."""
        if not self._kept:
            try:
                await write()
            except LedgerUnwritableError:
                pass
            else:
                if done is not None:
                    done()
                return True
        self.keep(write, name, done=done)
        return False

    def keep(self, write: Write, name: str, *, done: Callable[[], None] | None = None) -> None:
        """Keeps ``write`` for after those already kept."""
        self._kept.append(_Kept(name, write, done))
        self._start()

    async def claim(self, key: str) -> bool:
        """``Ledger.claim``, answered from memory while the disk refuses it (and written
        once it takes writes): True for the first caller of this process at least."""
        if key in self._claimed:
            return False
        try:
            return await self.ledger.claim(key)
        except LedgerUnwritableError:
            self.claim_later(key)
            return True

    def claimed_here(self, key: str) -> bool:
        """Whether this process claimed ``key`` while the disk refused to note it."""
        return key in self._claimed

    def claim_later(self, key: str) -> None:
        """Claims ``key`` in memory now, and in the ledger once it takes writes (a claim
        made there meanwhile by another caller is the same claim)."""
        self._claimed.add(key)
        self.keep(partial(self.ledger.claim, key), f"claim {key}")

    def when_writable(self, then: Callable[[], None]) -> None:
        """``then()`` once the ledger takes writes again and everything kept is written."""
        self._waiting.append(then)
        self._start()

    async def close(self) -> None:
        """Stops trying; what is kept is lost with the process (the ledger's watches and
        requests, written before the disk filled, cover it at the next start)."""
        if self._task is not None:
            await stop_task(self._task)
            self._task = None
        if self._kept:
            logger.warning("%d ledger write(s) not made before the stop", len(self._kept))

    def _start(self) -> None:
        self._wake.set()
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._drain(), name="backlog")

    async def _drain(self) -> None:
        failures = 0
        while self._kept or self._waiting:
            if not self._kept:
                await asyncio.sleep(self._backoff.delay(self._probes))
                self._probes += 1
                self._kept.append(_Kept("probe", self.ledger.probe, None))
            first = self._kept[0]
            try:
                await first.write()
            except LedgerUnwritableError:
                self._wake.clear()
                await wait_set(self._wake, self._backoff.delay(failures))
                failures += 1
                continue
            except LedgerClaimLostError as exc:  # another replica finishes that entry
                logger.info("kept ledger write %s dropped: %s", first.name, exc)
                if first.done is not None:
                    first.done()  # nothing of it is this process's to keep
            except Exception:  # a write that can never succeed must not hold up the rest
                logger.exception("kept ledger write %s failed: dropped", first.name)
            else:
                if first.done is not None:
                    first.done()
                if first.name != "probe":
                    self._probes = 0
            failures = 0
            self._kept.pop(0)
            if not self._kept:
                waiting, self._waiting = self._waiting, []
                for then in waiting:
                    then()
