"""What the runs ask of their tools and of a hosting whose agents may end late."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Protocol, runtime_checkable

from harness.config.roles import Role
from harness.runtime.spec import RunOutcome, ToolDeclaration, ToolGateway


class ToolProvider(ToolGateway, Protocol):
    """The harness tools: which ones a role is offered, and serving their calls."""

    def declarations(self, role: Role) -> tuple[ToolDeclaration, ...]: ...


@runtime_checkable
class LateOutcomes(Protocol):
    """A hosting whose agents may end after all once their run was recorded ``interrupted``
    (a worker judged lost that was only cut off, or one a restart could not find), and which
    keeps what it owes its workers (kills) and awaits from them past a restart."""

    def on_late_outcome(
        self, listener: Callable[[str, str, RunOutcome], Awaitable[None]]
    ) -> None: ...

    async def await_late_outcome(self, task_slug: str, agent_id: str) -> None: ...

    async def resume_aftercare(
        self, folder: Path, run_id: str | None, alive: Callable[[str], Awaitable[bool]]
    ) -> None: ...
