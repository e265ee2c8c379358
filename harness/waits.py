"""Waiting on an ``asyncio.Event`` with a bound, in the loops of long-lived tasks (an outbox, a
lease keeper, a poller) that a stop ends by cancelling them.

``asyncio.wait_for(event.wait(), timeout)`` loses a cancellation on Python 3.11 when the event
is set in the same turn of the loop as the cancel (it returns the event's result instead of
raising): the loop goes round again and the stop that awaits its task waits for ever.
``asyncio.timeout`` has no such race, so every bounded wait on an event goes through here;
and a task is stopped with ``cancel_surely`` or ``stop_task``, which cancel it again if a
library it awaited lost the cancellation the same way.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any


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
