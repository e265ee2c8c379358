"""What the scheduler needs of a front end: how a firing's task starts where its people see
it, how its run ends, how they are told, and which task a firing already made."""

from __future__ import annotations

from typing import Protocol

from harness.config.routines_schema import Routine
from harness.routines.model import Firing, LaunchedRun, RunOutcome


class Launcher(Protocol):
    async def launch(self, routine: Routine, firing: Firing) -> LaunchedRun:
        """Starts the firing's task; RoutineError (said where its people see it) if it cannot."""
        ...

    async def outcome(self, routine: Routine, run: LaunchedRun) -> RunOutcome:
        """Waits for the run's end and says how it went."""
        ...

    async def notify(self, routine: Routine, text: str) -> None:
        """Tells the routine's owner and channel ``text`` (it paused itself)."""
        ...

    async def find(self, routine: Routine, firing: Firing) -> LaunchedRun | None:
        """The run whose task records this firing (its trigger's key), if one was made."""
        ...
