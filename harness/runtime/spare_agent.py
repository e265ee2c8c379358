"""One spare agent: what a runtime starts ahead (``WarmAgent``), which dispatches it fits,
and how it ends; the pools that keep them are ``spares.py`` and ``follow_up_spares.py``."""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from harness.runtime.spec import AgentControl, AgentSpec, RunIO, RunOutcome
from harness.workspaces.manager import SandboxFolders

logger = logging.getLogger(__name__)

SPARE_ID = "spare"
CLOSE_TIMEOUT = 10.0  # seconds
_ORDER = itertools.count()


class WarmAgent(Protocol):
    """A runtime's agent started ahead for ``template``, waiting for its dispatch."""

    template: AgentSpec

    @property
    def pid(self) -> int | None:
        """Its CLI's process; None once it ended."""
        ...

    async def ended(self) -> None:
        """Returns once its CLI's process has ended."""
        ...

    async def close(self) -> None: ...


@runtime_checkable
class WarmRuntime(Protocol):
    """A runtime that can start agents ahead. ``warm`` raises HarnessError when it cannot
    (dispatches then start cold)."""

    async def warm(self, template: AgentSpec) -> WarmAgent: ...

    async def run_warm(
        self, warm: Any, spec: AgentSpec, control: AgentControl, io: RunIO
    ) -> RunOutcome: ...


def as_template(spec: AgentSpec) -> AgentSpec:
    return dataclasses.replace(
        spec, agent_id=SPARE_ID, prompt="", cwd="", task_slug="", attachments=(), cli_state=None
    )


def fits(template: AgentSpec, spec: AgentSpec) -> bool:
    """Whether an agent made for ``template`` is the agent ``spec`` asks for, but for who it
    is, its task, its prompt and its folder (pure)."""
    return as_template(template) == as_template(spec)


@dataclass
class Spare:
    view: Path  # its folder, at the path its agent is shown (``workspaces/views.py``)
    warm: WarmAgent
    order: int = field(default_factory=lambda: next(_ORDER))  # newer spares are larger
    watch: asyncio.Task[None] | None = None  # until its CLI ends while it waits


async def close_spare(spare: Spare, folders: SandboxFolders) -> None:
    """Ends a spare: its CLI, and the path its folder is shown at. A CLI that does not end
    within CLOSE_TIMEOUT is left to the run-id sweep of the next start (``orphans.py``)
    rather than holding its host's shutdown."""
    stop_watching(spare)
    try:
        async with asyncio.timeout(CLOSE_TIMEOUT):
            await spare.warm.close()
    except TimeoutError:
        logger.warning("a spare agent's CLI did not end within %s s", CLOSE_TIMEOUT)
    finally:
        await folders.drop_view(spare.view)


def stop_watching(spare: Spare) -> None:
    """Its watch ends: the spare is taken or closing (its CLI's end means nothing now)."""
    if spare.watch is not None:
        spare.watch.cancel()
        spare.watch = None


def announce(changed: asyncio.Condition, notes: set[asyncio.Future[None]]) -> None:
    """Wakes whoever waits on ``changed``, soon: the caller need not await (and so cannot
    be cancelled between storing a spare and saying so)."""

    async def notify() -> None:
        async with changed:
            changed.notify_all()

    note = asyncio.ensure_future(notify())
    notes.add(note)  # kept until it ran
    note.add_done_callback(notes.discard)


async def close_surely(spare: Spare, folders: SandboxFolders) -> None:
    """Ends a spare even when the caller is cancelled meanwhile (its CLI must not stay)."""
    await asyncio.shield(close_spare(spare, folders))
