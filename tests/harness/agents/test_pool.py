import asyncio
from pathlib import Path

import pytest

from harness.agents.pool import AgentPool, PoolEntry
from harness.testing.clock import FakeClock


def entry(agent_id: str, *, task: str = "t", writes: bool = False) -> PoolEntry:
    return PoolEntry(
        agent_id=agent_id,
        role="developer",
        task_slug=task,
        cwd=Path("."),
        parent_id=None,
        depth=1,
        queued_at="2026-01-01T00:00:00Z",
        writes=writes,
    )


async def start(pool: AgentPool, e: PoolEntry) -> bool:
    pool.register(e)
    ok = await pool.acquire(e)
    if ok:
        e.state = "running"
    return ok


async def queued(pool: AgentPool, count: int) -> None:
    """Until ``count`` agents wait in the queue (bounded: the tasks only need to be scheduled)."""

    async def check() -> None:
        while pool.queue_length() < count:
            await asyncio.sleep(0)

    await asyncio.wait_for(check(), 1.0)


@pytest.mark.anyio
async def test_agents_beyond_the_cap_queue_and_start_in_arrival_order() -> None:
    pool = AgentPool(max_concurrent=1)
    first, second, third = entry("a1"), entry("a2"), entry("a3")
    assert await start(pool, first)
    waiting_second = asyncio.create_task(start(pool, second))
    waiting_third = asyncio.create_task(start(pool, third))
    await queued(pool, 2)
    assert [a.status for a in pool.snapshot()] == ["running", "queued", "queued"]
    pool.release(first)
    assert await asyncio.wait_for(waiting_second, 1)
    assert not waiting_third.done()
    pool.release(second)
    assert await asyncio.wait_for(waiting_third, 1)


@pytest.mark.anyio
async def test_an_agents_elapsed_time_counts_from_when_it_was_registered() -> None:
    clock = FakeClock()
    pool = AgentPool(max_concurrent=1, clock=clock)
    first, second = entry("a1"), entry("a2")
    assert await start(pool, first)
    clock.advance(12.5)
    pool.register(second)  # queued behind the first
    clock.advance(2.0)

    assert [(a.agent_id, a.elapsed_seconds) for a in pool.snapshot()] == [
        ("a1", 14.5),
        ("a2", 2.0),
    ]
    second_info = pool.info("a2")
    assert second_info is not None and second_info.elapsed_seconds == 2.0


@pytest.mark.anyio
async def test_killing_a_queued_agent_removes_it_from_the_queue() -> None:
    pool = AgentPool(max_concurrent=1)
    first, second = entry("a1"), entry("a2")
    assert await start(pool, first)
    waiting = asyncio.create_task(start(pool, second))
    await queued(pool, 1)
    assert await pool.kill("a2", "not needed")
    assert await asyncio.wait_for(waiting, 1) is False
    pool.release(second)
    pool.release(first)
    third = entry("a3")
    assert await start(pool, third)  # the slot came back


@pytest.mark.anyio
async def test_kill_of_an_unknown_agent_says_so() -> None:
    assert await AgentPool(2).kill("a000000", "x") is False


@pytest.mark.anyio
async def test_writers_of_one_task_take_turns_while_readers_and_other_tasks_run() -> None:
    pool = AgentPool(max_concurrent=4)
    first = entry("w1", writes=True)
    assert await start(pool, first)
    second = asyncio.create_task(start(pool, entry("w2", writes=True)))
    await queued(pool, 1)
    # A reader of the same task and a writer of another task do not wait.
    assert await start(pool, entry("r1"))
    assert await start(pool, entry("x1", task="other", writes=True))
    statuses = {a.agent_id: (a.status, a.activity) for a in pool.snapshot()}
    assert statuses["w2"] == ("queued", "waiting for the task's other writer to finish")
    pool.release(first)
    assert await asyncio.wait_for(second, 1)


@pytest.mark.anyio
async def test_a_writer_waiting_on_others_lends_its_task_turn_and_gets_it_back_first() -> None:
    pool = AgentPool(max_concurrent=4)
    coordinator = entry("w1", writes=True)
    assert await start(pool, coordinator)
    drafted = entry("w2", writes=True)
    drafted_start = asyncio.create_task(start(pool, drafted))
    await queued(pool, 1)
    stop_waiting = asyncio.Event()

    async def await_drafted() -> None:
        async with pool.lend_slot(coordinator):
            await stop_waiting.wait()

    waiting = asyncio.create_task(await_drafted())
    assert await asyncio.wait_for(drafted_start, 1)  # it runs while the coordinator waits
    later = asyncio.create_task(start(pool, entry("w3", writes=True)))
    await queued(pool, 1)
    stop_waiting.set()
    await queued(pool, 2)  # the coordinator is back in line, ahead of w3
    pool.release(drafted)
    await asyncio.wait_for(waiting, 1)
    assert coordinator.state == "running" and coordinator.holds_task
    assert not later.done()
    pool.release(coordinator)
    assert await asyncio.wait_for(later, 1)


@pytest.mark.anyio
async def test_killing_a_writer_waiting_for_its_turn_leaves_the_turn_to_the_next() -> None:
    pool = AgentPool(max_concurrent=4)
    first = entry("w1", writes=True)
    assert await start(pool, first)
    waiting = asyncio.create_task(start(pool, entry("w2", writes=True)))
    await queued(pool, 1)
    assert await pool.kill("w2", "not needed")
    assert await asyncio.wait_for(waiting, 1) is False
    pool.release(first)
    assert await start(pool, entry("w3", writes=True))
