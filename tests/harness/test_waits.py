"""A bounded wait on an event, as the loops of the outbox, the leases and the pollers use it:
a stop that cancels such a loop always ends it."""

from __future__ import annotations

import asyncio

import pytest

from harness.waits import stop_task, wait_set

pytestmark = pytest.mark.anyio


async def test_a_loop_cancelled_as_its_event_is_set_ends() -> None:
    wake = asyncio.Event()
    rounds = 0

    async def loop() -> None:
        nonlocal rounds
        while True:
            wake.clear()
            await wait_set(wake, 30)
            rounds += 1

    task = asyncio.create_task(loop())
    await asyncio.sleep(0)  # the loop waits on its event
    wake.set()  # woken and stopped in the same turn, as a stop wakes an outbox to drain it
    task.cancel()

    await asyncio.wait({task}, timeout=5)
    assert task.cancelled()  # asyncio.wait_for on 3.11 returned instead, and the loop went on
    assert rounds == 0


async def test_it_says_whether_the_event_was_set_within_the_bound() -> None:
    event = asyncio.Event()
    assert await wait_set(event, 0.01) is False
    asyncio.get_running_loop().call_soon(event.set)
    assert await wait_set(event, 5) is True
    assert await wait_set(event, None) is True  # set already: no wait


async def test_a_loop_that_lost_its_cancellation_is_cancelled_again_and_ends() -> None:
    lost = 0

    async def loop() -> None:
        nonlocal lost
        while True:
            try:
                await asyncio.sleep(30)
            except asyncio.CancelledError:
                if lost == 0:  # as a library awaiting with wait_for on 3.11 may do
                    lost += 1
                    continue
                raise

    task = asyncio.create_task(loop())
    await asyncio.sleep(0)

    async with asyncio.timeout(5):  # a task cancelled once and awaited waits for ever
        await stop_task(task)
    assert task.cancelled() and lost == 1


async def test_what_a_stopped_loop_raised_besides_its_cancellation_is_raised() -> None:
    async def loop() -> None:
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            raise ValueError("its own cleanup failed") from None

    task = asyncio.create_task(loop())
    await asyncio.sleep(0)
    with pytest.raises(ValueError, match="its own cleanup failed"):
        await stop_task(task)
