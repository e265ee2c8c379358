"""Bounded waits, as the loops of the outbox, the leases and the pollers use them: a stop that
cancels such a loop always ends it."""

from __future__ import annotations

import ast
import asyncio
from pathlib import Path

import pytest

from harness.waits import stop_task, stop_tasks, wait_set, within

ROOT = Path(__file__).resolve().parents[2]

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


async def test_a_loop_cancelled_as_its_result_comes_ends() -> None:
    results: asyncio.Queue[int] = asyncio.Queue()
    rounds = 0

    async def loop() -> None:
        nonlocal rounds
        while True:
            await within(results.get(), 30)
            rounds += 1

    task = asyncio.create_task(loop())
    await asyncio.sleep(0)  # the loop waits on its queue
    results.put_nowait(1)  # a result and the stop in the same turn
    task.cancel()

    await asyncio.wait({task}, timeout=5)
    assert task.cancelled()  # asyncio.wait_for on 3.11 returned the result, and looped on
    assert rounds == 0


async def test_within_gives_the_result_or_times_out() -> None:
    assert await within(asyncio.sleep(0, "said"), 5) == "said"
    assert await within(asyncio.sleep(0, "said"), None) == "said"
    with pytest.raises(TimeoutError):
        await within(asyncio.sleep(30), 0.01)


async def test_a_shielded_wait_that_times_out_leaves_its_work_running() -> None:
    work = asyncio.ensure_future(asyncio.sleep(0.05, "done"))
    with pytest.raises(TimeoutError):
        await within(asyncio.shield(work), 0.001)
    assert not work.cancelled()
    assert await work == "done"


async def test_loops_stopped_together_all_end_though_one_lost_its_cancellation() -> None:
    lost = 0

    async def retrying() -> None:
        nonlocal lost
        while True:
            try:
                await asyncio.sleep(30)
            except asyncio.CancelledError:
                if lost == 0:  # as a NATS request awaited with wait_for on 3.11 may do
                    lost += 1
                    continue
                raise

    async def failing() -> None:
        raise ValueError("what it raised stays on it")

    tasks = [asyncio.create_task(retrying()), asyncio.create_task(asyncio.sleep(30))]
    tasks.append(asyncio.create_task(failing()))
    await asyncio.sleep(0)

    async with asyncio.timeout(5):
        await stop_tasks(tasks)
    assert lost == 1
    assert tasks[0].cancelled() and tasks[1].cancelled()
    assert isinstance(tasks[2].exception(), ValueError)


def waits_for(path: Path) -> list[int]:
    """The lines of ``path`` that wait with ``asyncio.wait_for`` (or import it)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Attribute) and node.attr == "wait_for":
            if isinstance(node.value, ast.Name) and node.value.id == "asyncio":
                found.append(node.lineno)
        elif isinstance(node, ast.ImportFrom) and node.module == "asyncio":
            found += [node.lineno for name in node.names if name.name == "wait_for"]
    return found


def test_no_module_of_the_harness_or_the_bot_waits_with_asyncio_wait_for() -> None:
    found = [
        f"{path.relative_to(ROOT)}:{line}"
        for folder in ("harness", "bot")
        for path in sorted((ROOT / folder).rglob("*.py"))
        for line in waits_for(path)
    ]
    assert found == [], "wait with harness.waits.within (or wait_set for an event) instead"


def test_the_check_above_sees_a_wait_for(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text(
        "import asyncio\nfrom asyncio import wait_for\n"
        "async def f(e):\n    await asyncio.wait_for(e.wait(), 1)\n",
        encoding="utf-8",
    )
    assert waits_for(module) == [2, 4]
