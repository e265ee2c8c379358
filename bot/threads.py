"""Threads and tasks: which Slack thread is bound to which task, and one lane per thread so
that its messages are worked one after the other (a follow-up waits its turn).

The binding itself lives in the task store (``task.thread``); the index is the bot's
in-memory view of it, loaded once at start-up and kept current as the bot binds threads
(the bot is the only writer of bindings), so an incoming message never scans every task.
A thread is *reserved* the moment a message starts a task in it, before the task exists,
so a follow-up that arrives meanwhile is already a follow-up.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass

from bot.background import Background
from harness.tasks.model import TaskSummary, ThreadRef

logger = logging.getLogger(__name__)


class ThreadIndex:
    def __init__(self) -> None:
        self._slugs: dict[ThreadRef, str | None] = {}

    def load(self, tasks: Iterable[TaskSummary]) -> None:
        for task in tasks:
            if task.thread is not None:
                self._slugs.setdefault(task.thread, task.slug)

    def is_bound(self, thread: ThreadRef) -> bool:
        """Bound, or reserved by a task being created."""
        return thread in self._slugs

    def reserve(self, thread: ThreadRef) -> None:
        self._slugs.setdefault(thread, None)

    def bind(self, thread: ThreadRef, slug: str) -> None:
        self._slugs[thread] = slug

    def release(self, thread: ThreadRef) -> None:
        """A reservation whose task could not be created."""
        if self._slugs.get(thread, "") is None:
            del self._slugs[thread]

    def slug(self, thread: ThreadRef) -> str | None:
        return self._slugs.get(thread)


@dataclass
class _Lane:
    tail: asyncio.Future[None] | None = None
    pending: int = 0


class ThreadLanes:
    """Per-thread FIFO: jobs of one thread run one at a time, in arrival order."""

    def __init__(self, background: Background) -> None:
        self._background = background
        self._lanes: dict[ThreadRef, _Lane] = {}

    def busy(self, thread: ThreadRef) -> bool:
        lane = self._lanes.get(thread)
        return lane is not None and lane.pending > 0

    def enqueue(self, thread: ThreadRef, job: Callable[[], Awaitable[None]], name: str) -> None:
        lane = self._lanes.setdefault(thread, _Lane())
        before = lane.tail
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        lane.tail = done
        lane.pending += 1

        async def run() -> None:
            try:
                if before is not None:
                    await asyncio.shield(before)
                await job()
            finally:
                done.set_result(None)
                lane.pending -= 1
                if lane.pending == 0 and self._lanes.get(thread) is lane:
                    del self._lanes[thread]

        self._background.spawn(run(), name=name)
