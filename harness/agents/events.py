"""Agent events for the front ends: queued, started, progress, finished.

Listeners may be plain functions or coroutines; a coroutine runs as its own task, kept
referenced until it ends, and its failure is logged rather than lost.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Generic, Literal, TypeVar

from harness.tasks.model import DispatchRecord, Task

logger = logging.getLogger(__name__)

# "finished_late": an agent recorded ``interrupted`` (its worker judged lost) finished after
# all; its record now holds the outcome its worker stored.
EventKind = Literal["queued", "started", "progress", "finished", "finished_late"]


@dataclass(frozen=True)
class AgentEvent:
    kind: EventKind
    task: Task
    record: DispatchRecord


Listener = Callable[[AgentEvent], Awaitable[None] | None]
E = TypeVar("E")


class Events(Generic[E]):
    """Events of one kind (``AgentEvent``, a pull request's) and who listens to them."""

    def __init__(self) -> None:
        self._listeners: list[Callable[[E], Awaitable[None] | None]] = []
        self._pending: set[asyncio.Future[Any]] = set()

    def subscribe(self, listener: Callable[[E], Awaitable[None] | None]) -> None:
        self._listeners.append(listener)

    def emit(self, event: E) -> list[asyncio.Future[Any]]:
        """Tells every listener; the tasks of those that are coroutines (awaited by an
        emitter that must know they are done)."""
        started: list[asyncio.Future[Any]] = []
        for listener in self._listeners:
            outcome = listener(event)
            if asyncio.iscoroutine(outcome):
                task = asyncio.ensure_future(outcome)
                self._pending.add(task)
                task.add_done_callback(_log_failure)
                task.add_done_callback(self._pending.discard)
                started.append(task)
        return started


def _log_failure(task: asyncio.Future[Any]) -> None:
    if not task.cancelled() and task.exception() is not None:
        logger.error("an agent event listener failed", exc_info=task.exception())
