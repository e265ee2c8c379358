import asyncio
from pathlib import Path

import pytest

from harness.pool import AgentPool, PoolEntry


def entry(agent_id: str) -> PoolEntry:
    return PoolEntry(
        agent_id=agent_id,
        role="developer",
        task_slug="t",
        cwd=Path("."),
        parent_id=None,
        depth=1,
        queued_at="2026-01-01T00:00:00Z",
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
        while len(pool._waiters) < count:
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
