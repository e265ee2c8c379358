"""The values of routines: a firing, the run it started, and what a routine keeps of them."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from harness.errors import HarnessError

FiringKind = Literal["schedule", "github", "http", "run"]
RunStatus = Literal["running", "completed", "failed", "killed", "interrupted"]
# How many recent runs and skipped firings a routine's state keeps.
KEEP = 20


class RoutineError(HarnessError):
    """A routine could not start its run (a prompt field the event lacks, an unknown routine):
    said in that run's thread or to its caller, never a crash."""

    def __init__(self, routine: str, message: str, *, fix: str = "", field: str = "") -> None:
        super().__init__(message, fix=fix)
        self.routine = routine
        self.field = field  # the prompt's field the event lacks, if that is what it is
        self.thread: str | None = None  # the run's thread, when one was posted


@dataclass(frozen=True)
class Firing:
    """One reason to run a routine once. ``key`` names it among the routine's firings (a
    schedule's slot, a GitHub delivery id, a call's id): the ledger lets each key start once."""

    routine: str
    kind: FiringKind
    key: str
    at: str  # when it fired (for a schedule: its slot's time), ISO 8601 UTC
    why: str  # in words, for the thread: "schedule 0 2 * * 1-5 (Europe/Paris)"
    link: str | None = None  # the GitHub event's page, when it has one
    by: str | None = None  # who called it (`harness routines run`: the user; HTTP: the caller)
    # The event's fields a prompt may name: the GitHub payload, or {"payload": body}.
    fields: Mapping[str, Any] = field(default_factory=dict, compare=False, repr=False)


@dataclass(frozen=True)
class LaunchedRun:
    """The task a firing started, where its people follow it."""

    slug: str
    thread: str  # a link to its thread
    agent_id: str | None = None


@dataclass(frozen=True)
class RunOutcome:
    status: RunStatus
    cost_usd: float | None = None
    error: str | None = None


@dataclass(frozen=True)
class RunRecord:
    firing: str  # the firing's key
    kind: FiringKind
    at: str
    status: RunStatus
    slug: str | None = None
    thread: str | None = None
    agent_id: str | None = None
    cost_usd: float | None = None
    error: str | None = None


@dataclass(frozen=True)
class Skip:
    at: str  # the firing's time
    why: str
    count: int = 1  # several slots missed at once are one entry


@dataclass(frozen=True)
class Pause:
    at: str
    by: str  # a user, or "failures"
    why: str


@dataclass(frozen=True)
class Starting:
    """A firing whose task is being made, and the process making it."""

    firing: Firing
    owner: str  # the process's token, which its claims in the ledger carry
    claimed: bool = False  # its claim settled earlier (a firing taken off the queue)


@dataclass(frozen=True)
class RoutineState:
    name: str
    # Schedules: the last slot handled (run or skipped), and when the routine was first seen
    # (no slot before it is owed).
    last_slot: str | None = None
    watch_from: str | None = None
    paused: Pause | None = None
    failures: int = 0  # consecutive failed runs
    runs: tuple[RunRecord, ...] = ()  # newest last
    skipped: tuple[Skip, ...] = ()  # newest last
    # Firings waiting for the running one to end (``overlap: queue``), oldest first: kept here
    # so that a restart starts them rather than drops them.
    queued: tuple[Firing, ...] = ()
    # Firings claimed (or taken off ``queued``) whose task is being made: kept here until the
    # run is recorded, so that a process dying in between leaves a firing its next start
    # resolves (its task found, started once within catchUp, or recorded skipped).
    starting: tuple[Starting, ...] = ()
