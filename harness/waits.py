"""Waiting with a bound, and stopping long-lived tasks (an outbox, a lease keeper, a poller)
that a stop ends by cancelling them.

``asyncio.wait_for(aw, timeout)`` loses a cancellation on Python 3.11 when ``aw``'s result
comes in the same turn of the loop as the cancel (it returns the result instead of raising):
a loop goes round again and the stop that awaits its task waits for ever. ``asyncio.timeout``
has no such race, so every bounded wait in the harness goes through here (``within``, and
``wait_set`` for an event); and a task is stopped with ``cancel_surely`` or ``stop_task``,
which cancel it again if a library it awaited lost the cancellation the same way.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Iterable
from typing import Any, TypeVar

T = TypeVar("T")


async def within(awaitable: Awaitable[T], seconds: float | None) -> T:
    """``awaitable``'s result, or TimeoutError once ``seconds`` have passed (None: no bound;
    a coroutine is cancelled then, a shielded future is left running). As
    ``asyncio.wait_for``, except that a cancellation always ends the wait with
    CancelledError, even as the result comes in the same turn."""
    async with asyncio.timeout(seconds):
        return await awaitable


async def wait_set(event: asyncio.Event, timeout: float | None) -> bool:
    """Whether ``event`` was set within ``timeout`` seconds (None: however long it takes). A
    cancellation always ends the wait with CancelledError, even as the event is set."""
    try:
        async with asyncio.timeout(timeout):
            await event.wait()
    except TimeoutError:
        return False
    return True


# A cancellation lost on the way is sent again this often until the task has ended.
CANCEL_AGAIN_AFTER = 0.05  # seconds


async def cancel_surely(task: asyncio.Future[Any]) -> None:
    """Cancels ``task`` and waits until it has ended, cancelling it again while it goes on: a
    library that loses or catches a cancellation now and then cannot keep it alive. What it
    raised is left on it, retrieved (it ended anyway: no news now)."""
    while not task.done():
        task.cancel()
        await asyncio.wait({task}, timeout=CANCEL_AGAIN_AFTER)
    if not task.cancelled():
        task.exception()


async def stop_task(task: asyncio.Task[Any]) -> None:
    """Cancels ``task`` (a long-lived loop) surely and waits until it has ended; what it
    raised other than its cancellation is raised here. Sent once, a cancellation can be lost:
    on Python 3.11 ``asyncio.wait_for``, and libraries that await with it (nats-py's requests
    among them), return their result instead when it comes in the same turn; the loop then
    goes round again, and a stop awaiting it would wait for ever."""
    await cancel_surely(task)
    with contextlib.suppress(asyncio.CancelledError):
        await task


async def stop_tasks(tasks: Iterable[asyncio.Future[Any]]) -> None:
    """``cancel_surely`` for each of ``tasks`` (loops that clean nothing up on their way out:
    a retry, a poller, a follower), all at once; what they raised is left on them."""
    await asyncio.gather(*(cancel_surely(task) for task in tasks))
