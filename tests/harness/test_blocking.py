"""A whole blocking operation run from async code (``run_whole``): its result or its error
comes back as from a call, and a caller cancelled while it runs is cancelled only once it
has ended, so what it does under the caller's locks is never cut off part way."""

from __future__ import annotations

import asyncio
import threading

import pytest

from harness.blocking import run_whole

pytestmark = pytest.mark.anyio

BOUND = 10.0  # seconds any wait here may take at most


async def test_the_operations_result_and_error_come_back_as_from_a_call() -> None:
    def add(a: int, b: int, *, times: int) -> int:
        return (a + b) * times

    def refuse() -> None:
        raise ValueError("no such branch")

    assert await run_whole(add, 2, 3, times=4) == 20
    with pytest.raises(ValueError, match="no such branch"):
        await run_whole(refuse)


async def test_a_cancelled_caller_waits_for_the_operation_to_end() -> None:
    started, release = threading.Event(), threading.Event()
    steps: list[str] = []

    def operation() -> None:
        started.set()
        release.wait(BOUND)
        steps.append("renamed the branch")
        steps.append("moved the folder")

    caller = asyncio.create_task(run_whole(operation))
    assert await asyncio.to_thread(started.wait, BOUND)
    caller.cancel()
    await asyncio.sleep(0)  # the caller takes the cancel (a plain thread hop would end here)
    caller.cancel()  # a second cancel, while it waits, does not cut the wait short either
    await asyncio.sleep(0)

    assert not caller.done() and steps == []  # still running, its caller waiting for it
    release.set()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(caller, BOUND)
    assert steps == ["renamed the branch", "moved the folder"]


async def test_an_operation_failing_after_its_caller_was_cancelled_leaves_the_cancel() -> None:
    started, release = threading.Event(), threading.Event()

    def operation() -> None:
        started.set()
        release.wait(BOUND)
        raise OSError("disk full")

    caller = asyncio.create_task(run_whole(operation))
    assert await asyncio.to_thread(started.wait, BOUND)
    caller.cancel()
    await asyncio.sleep(0)
    release.set()

    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(caller, BOUND)


async def test_a_burst_of_operations_never_holds_up_other_threaded_work() -> None:
    release = threading.Event()

    def operation(number: int) -> int:
        release.wait(BOUND)
        return number

    # More than the event loop's default pool has threads (at most 32, or cores + 4).
    burst = [asyncio.create_task(run_whole(operation, n)) for n in range(40)]
    for _ in range(3):  # every operation of the burst handed to its thread
        await asyncio.sleep(0)
    try:
        # Answered while every operation of the burst still waits.
        other = await asyncio.wait_for(asyncio.to_thread(lambda: "task store read"), BOUND)
        assert other == "task store read"
    finally:
        release.set()
    assert sorted(await asyncio.gather(*burst)) == list(range(40))
