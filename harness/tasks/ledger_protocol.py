"""What a front end asks of its ledger (seen keys, requests taken on, watches, what it owes
threads), whichever keeps it: ``SqliteLedger`` (one process, a file beside the tasks) or
``NatsLedger`` (bot replicas sharing a JetStream key-value bucket). ``open_ledger`` in
harness/project.py chooses, from config.yaml's ``store:``.

Both keep the same promises, checked by one conformance suite
(tests/harness/tasks/ledger_suite.py). A ledger shared by several processes adds one: an owed
entry is delivered by one process at a time. ``pending`` lists the entries of every thread,
but those of a thread another process is delivering come due only when that process's claim
on it would expire, and a process whose claim was taken over (it stopped, say, and another
took its thread) is refused its ``advance`` / ``postpone`` / ``delivered`` / ``give_up`` with
``LedgerClaimLostError``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from harness.clock import Clock
from harness.errors import HarnessError

JSON = dict[str, Any]


class LedgerUnwritableError(HarnessError):
    """The ledger refused a write (its disk full or failing, its server out of reach):
    nothing of it is kept."""


class LedgerClaimLostError(HarnessError):
    """Another process delivers this entry's thread now (this one's claim on it expired and
    was taken over): the write is refused, and the entry is that process's to finish."""


@dataclass(frozen=True)
class Owed:
    """One outbox entry: ``data`` as the front end stored it, ``step`` steps of it done."""

    id: int
    lane: str  # entries of one lane are delivered in order (a Slack thread)
    data: JSON
    step: int
    attempts: int
    due: float  # epoch seconds of the next attempt
    error: str | None  # why the last attempt failed


class Ledger(Protocol):
    """Times are epoch seconds of ``clock``'s wall time: they outlive the process."""

    # The ledger's file, when it has one (None: in memory, or on a server).
    file: Path | None
    clock: Clock
    # Why the ledger takes no writes now (its disk is full, its server gone); None while it does.
    problem: str | None
    # Whether other processes (bot replicas) read and write it too.
    shared: bool

    async def close(self) -> None: ...

    # -- seen keys and requests taken on -----------------------------------------------------
    async def remember(
        self,
        keys: Iterable[str],
        at: float | None = None,
        *,
        intake: Mapping[str, JSON] | None = None,
    ) -> None:
        """Note ``keys`` as seen (a key seen before keeps its time) and the requests of
        ``intake`` as taken on."""

    async def intake(self) -> list[tuple[str, JSON, float]]:
        """Requests taken on and not handled yet, oldest first: (key, data, when)."""
        ...

    async def annotate_intake(self, key: str, **fields: Any) -> None: ...
    async def handled(self, key: str) -> None: ...
    async def claim(self, key: str, *, intake: tuple[str, JSON] | None = None) -> bool:
        """True for the one caller that sees ``key`` first, across processes and restarts."""
        ...

    async def claimed(self, key: str) -> bool:
        """Whether ``key`` was seen or claimed, by this process or another (it claims nothing)."""
        ...

    async def recent(self, since: float) -> list[tuple[str, float]]:
        """The keys seen at or after ``since``, oldest first; older ones are forgotten."""
        ...

    # -- watches ---------------------------------------------------------------------------
    async def watch(self, agent_id: str, data: JSON, *, handles: str | None = None) -> None: ...
    async def watches(self) -> list[tuple[str, JSON]]: ...
    async def unwatch(self, agent_id: str) -> None: ...

    # -- the outbox ------------------------------------------------------------------------
    async def owe(
        self, lane: str, data: JSON, *, settles: str | None = None, handles: str | None = None
    ) -> int: ...
    async def owe_once(
        self,
        claim: str | None,
        lane: str,
        data: JSON,
        *,
        settles: str | None = None,
        handles: str | None = None,
        drops: Sequence[int] = (),
    ) -> int | None: ...
    async def pending(self) -> list[Owed]: ...
    async def advance(self, entry_id: int, step: int) -> None: ...
    async def postpone(self, entry_id: int, due: float, error: str) -> None: ...
    async def delivered(self, entry_id: int) -> None: ...
    async def give_up(self, entry_id: int, error: str) -> None: ...
    async def failed(self) -> list[Owed]: ...
    async def probe(self) -> None:
        """A write people never see: raises ``LedgerUnwritableError`` while writes fail."""
        ...
