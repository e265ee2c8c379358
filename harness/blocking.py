"""A whole blocking operation from async code: the git calls and folder work of one step
(adding a worktree, adopting a spare, dropping one) run together in one worker thread, so
the event loop waits once per operation rather than once per call.

Such an operation changes files and git state under its caller's locks. A thread cannot be
stopped part way, so a caller cancelled meanwhile is cancelled once the operation has ended,
never before: its locks are not let go while the operation still runs under them.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from typing import ParamSpec, TypeVar

T = TypeVar("T")
P = ParamSpec("P")


async def run_whole(function: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> T:
    """``function(*args, **kwargs)``, run in a worker thread to its end."""
    running = asyncio.ensure_future(asyncio.to_thread(function, *args, **kwargs))
    try:
        return await asyncio.shield(running)
    except asyncio.CancelledError:
        while not running.done():
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.wait([running])
        if not running.cancelled():
            running.exception()  # read: the caller's cancel is what it gets, not this
        raise
