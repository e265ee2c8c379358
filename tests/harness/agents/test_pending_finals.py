"""Final records the store refused: spooled outside the task folder, retried until stored,
applied at the next start before recovery, and what the harness says of them meanwhile.

The real file store; where it must refuse a write, a double wraps it at its boundary
(``save_dispatch`` raising the OSError an unwritable folder raises). The fault tests
(``tests/faults/test_unwritable_task_folder.py``) make the folder unwritable for real."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from harness.agents.pending_finals import PendingFinals
from harness.agents.recovery import recover_interrupted
from harness.retry import Backoff
from harness.tasks.common import PENDING_FOLDER
from harness.tasks.model import AgentResult, DispatchRecord, Task
from harness.tasks.store import FileTaskStore
from harness.testing.records import make_record

pytestmark = pytest.mark.anyio

QUICK = Backoff(0.01, 0.05)


class Refusing:
    """The store, refusing ``save_dispatch`` (as an unwritable task folder does) while
    ``refuse`` is set."""

    def __init__(self, store: FileTaskStore) -> None:
        self.store = store
        self.refuse = True
        self.tries = 0

    async def save_dispatch(self, slug: str, record: DispatchRecord) -> Task:
        self.tries += 1
        if self.refuse:
            raise PermissionError(13, "Operation not permitted", f"{slug}/task.json")
        return await self.store.save_dispatch(slug, record)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.store, name)


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[FileTaskStore]:
    found = FileTaskStore(tmp_path / "tasks")
    yield found
    await found.close()


def done(record: DispatchRecord) -> DispatchRecord:
    return dataclasses.replace(
        record,
        status="completed",
        completed_at="2026-01-01T10:05:00Z",
        result=AgentResult("did it"),
        cost_usd=0.25,
    )


async def wait_until(check: Any) -> None:
    async def poll() -> None:
        while not await check():
            await asyncio.sleep(0.01)

    await asyncio.wait_for(poll(), 10)


async def test_a_refused_final_record_is_spooled_and_stored_once_the_store_takes_it(
    store: FileTaskStore,
) -> None:
    task = await store.create("fix the footer")
    running = make_record("a1", run_id="00" * 8)
    await store.save_dispatch(task.slug, running)
    refusing = Refusing(store)
    told: list[tuple[Task, DispatchRecord]] = []
    pending = PendingFinals(
        store.tasks_dir / PENDING_FOLDER,
        refusing,
        on_stored=lambda t, r: told.append((t, r)),
        backoff=QUICK,
    )
    final = done(running)

    await pending.keep(task.slug, final)
    await wait_until(lambda: _async(refusing.tries >= 2))

    spool = store.tasks_dir / PENDING_FOLDER / "a1.json"
    assert spool.is_file()
    assert (await store.record("a1")).status == "running"
    # What is said of it meanwhile is the kept record, here and in another process.
    assert await pending.record("a1") == final
    other = PendingFinals(store.tasks_dir / PENDING_FOLDER, store)
    assert await other.record("a1") == final
    assert (await other.overlay(await store.get(task.slug))).dispatches == (final,)
    assert await other.slugs() == {task.slug}

    refusing.refuse = False
    await wait_until(lambda: _async(bool(told)))  # told last, once stored and unspooled

    assert not pending.pending_ids()
    assert await store.record("a1") == final
    assert not spool.exists()
    assert [r for _, r in told] == [final]
    assert await other.record("a1") is None
    await pending.close()


async def test_a_spooled_record_is_applied_at_the_next_start_and_not_taken_for_interrupted(
    store: FileTaskStore,
) -> None:
    task = await store.create("fix the footer")
    gone_run = "ab" * 8  # a run no process holds: its dispatches look interrupted
    running = make_record("a1", run_id=gone_run)
    await store.save_dispatch(task.slug, running)
    left = PendingFinals(store.tasks_dir / PENDING_FOLDER, Refusing(store))
    await left.keep(task.slug, done(running))
    await left.close()  # the process stopped with the record pending

    # The next start: the store takes writes again.
    pending = PendingFinals(store.tasks_dir / PENDING_FOLDER, store, backoff=QUICK)
    assert await pending.apply_spooled() == set()
    marked = await recover_interrupted(store, "2026-01-01T11:00:00Z", finished=set())

    assert marked == []
    assert await store.record("a1") == done(running)
    assert not (store.tasks_dir / PENDING_FOLDER / "a1.json").exists()


async def test_a_record_still_refused_at_the_start_is_retried_and_its_dispatch_left_alone(
    store: FileTaskStore,
) -> None:
    task = await store.create("fix the footer")
    running = make_record("a1", run_id="cd" * 8)
    other = make_record("a2", run_id="cd" * 8)  # no spooled record: truly interrupted
    await store.save_dispatch(task.slug, running)
    await store.save_dispatch(task.slug, other)
    refusing = Refusing(store)
    left = PendingFinals(store.tasks_dir / PENDING_FOLDER, refusing)
    await left.keep(task.slug, done(running))
    await left.close()

    pending = PendingFinals(store.tasks_dir / PENDING_FOLDER, refusing, backoff=QUICK)
    finished = await pending.apply_spooled()
    assert finished == {"a1"}
    marked = await recover_interrupted(store, "2026-01-01T11:00:00Z", finished=finished)

    assert [r.agent_id for _, r in marked] == ["a2"]
    assert (await store.record("a1")).status == "running"
    refusing.refuse = False
    await wait_until(lambda: _async(not pending.pending_ids()))
    assert await store.record("a1") == done(running)
    await pending.close()


async def test_a_record_of_a_deleted_task_is_dropped_and_a_damaged_spool_file_left_alone(
    store: FileTaskStore,
) -> None:
    task = await store.create("fix the footer")
    running = make_record("a1")
    await store.save_dispatch(task.slug, running)
    left = PendingFinals(store.tasks_dir / PENDING_FOLDER, Refusing(store))
    await left.keep(task.slug, done(running))
    await left.close()
    await store.delete(task.slug)
    damaged = store.tasks_dir / PENDING_FOLDER / "a9.json"
    damaged.write_text("{not json", "utf-8")

    pending = PendingFinals(store.tasks_dir / PENDING_FOLDER, store, backoff=QUICK)
    assert await pending.apply_spooled() == set()

    assert not (store.tasks_dir / PENDING_FOLDER / "a1.json").exists()
    assert damaged.read_text("utf-8") == "{not json"  # kept for a person to look at


async def _async(value: bool) -> bool:
    return value


async def test_a_note_added_while_the_final_record_is_pending_is_stored_with_it(
    store: FileTaskStore,
) -> None:
    task = await store.create("fix the footer")
    running = make_record("a1")
    await store.save_dispatch(task.slug, running)
    refusing = Refusing(store)
    pending = PendingFinals(store.tasks_dir / PENDING_FOLDER, refusing, backoff=QUICK)
    await pending.keep(task.slug, done(running))

    noted = await pending.amend("a1", lambda r: dataclasses.replace(r, undelivered="no access"))
    assert await pending.amend("a2", lambda r: r) is None  # none pending: the store has it
    refusing.refuse = False
    await wait_until(lambda: _async(not pending.pending_ids()))

    assert noted == dataclasses.replace(done(running), undelivered="no access")
    assert await store.record("a1") == noted
    assert not (store.tasks_dir / PENDING_FOLDER / "a1.json").exists()
    await pending.close()
