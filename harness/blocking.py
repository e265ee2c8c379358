"""A whole blocking operation from async code: the git calls and folder work of one step
(adding a worktree, adopting a spare, dropping one) run together in one worker thread, so
the event loop waits once per operation rather than once per call.

Such an operation changes files and git state under its caller's locks. A thread cannot be
stopped part way, so a caller cancelled meanwhile is cancelled once the operation has ended,
never before: its locks are not let go while the operation still runs under them.

The operations wait mostly on git, some for seconds (checking out a large repository): they
run on threads of their own, so a burst of them never holds up the short file work other
code sends to the event loop's default threads (``asyncio.to_thread``).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import ParamSpec, TypeVar

T = TypeVar("T")
P = ParamSpec("P")

# As many operations at once as the workspaces ever run: one per task being prepared, spare
# being made or view being settled, each mostly waiting on one git process.
_WORKERS = 16
_made = threading.Lock()
_pool: ThreadPoolExecutor | None = None


def _threads() -> ThreadPoolExecutor:
    global _pool
    with _made:
        if _pool is None:
            _pool = ThreadPoolExecutor(max_workers=_WORKERS, thread_name_prefix="whole-op")
        return _pool


async def run_whole(function: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> T:
    """``function(*args, **kwargs)``, run in a worker thread to its end."""
    call = functools.partial(function, *args, **kwargs)
    running = asyncio.get_running_loop().run_in_executor(_threads(), call)
    try:
        return await asyncio.shield(running)
    except asyncio.CancelledError:
        while not running.done():
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.wait([running])
        if not running.cancelled():
            running.exception()  # read: the caller's cancel is what it gets, not this
        raise
