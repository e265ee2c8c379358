"""Background work of the bot: tasks kept referenced (so they are not garbage-collected),
their failures logged, and drained on shutdown."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine
from typing import Any, TypeVar

logger = logging.getLogger(__name__)
T = TypeVar("T")


class Background:
    def __init__(self) -> None:
        self._tasks: set[asyncio.Task[Any]] = set()

    def spawn(self, coro: Coroutine[Any, Any, T], name: str) -> asyncio.Task[T]:
        task = asyncio.get_running_loop().create_task(coro, name=name)
        self._tasks.add(task)
        task.add_done_callback(self._done)
        return task

    def _done(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            logger.error("bot task %s failed", task.get_name(), exc_info=task.exception())

    def __len__(self) -> int:
        return len(self._tasks)

    async def drain(self, timeout: float) -> float:
        """Waits up to ``timeout`` s for the work in flight (also work it starts), then
        cancels what is left and waits for it to unwind; returns the seconds of ``timeout``
        left (0 when it ran out)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while self._tasks:
            remaining = deadline - loop.time()
            if remaining <= 0:
                break
            await asyncio.wait(set(self._tasks), timeout=remaining)
        left = set(self._tasks)
        for task in left:
            task.cancel()
        if left:
            logger.warning("cancelled %d bot task(s) still running at shutdown", len(left))
            await asyncio.gather(*left, return_exceptions=True)
        return max(0.0, deadline - loop.time())
