"""The file store's index (``<tasks dir>/.index.sqlite3``): a cache that never shows stale
data, whatever changed the task.json files behind its back."""

from __future__ import annotations

import json
import logging
import os
import shutil
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

import harness.tasks.index
from harness.errors import AgentNotFoundError
from harness.tasks.index import TaskIndex
from harness.tasks.model import Task, ThreadRef
from harness.tasks.store import FileTaskStore
from harness.tasks.task_json import Fingerprint, dump_task, read_task_file
from harness.testing.records import make_record

pytestmark = pytest.mark.anyio


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[FileTaskStore]:
    store = FileTaskStore(tmp_path)
    yield store
    await store.close()


def edit(file: Path, change: Any) -> None:
    """Change task.json in place, as a person with an editor would: a second or more after
    the store wrote it. (Kernels with coarse file times give writes within one tick, a few
    ms, the same mtime; no person edits that fast, but a test would.)"""
    before = file.stat().st_mtime_ns
    data = json.loads(file.read_text(encoding="utf-8"))
    change(data)
    file.write_text(json.dumps(data, indent=2), encoding="utf-8")
    os.utime(file, ns=(before + 1_000_000_000, before + 1_000_000_000))


async def test_the_index_is_a_dot_file_next_to_the_tasks_and_never_listed(
    store: FileTaskStore, tmp_path: Path
) -> None:
    await store.create("Do it")

    assert (tmp_path / ".index.sqlite3").is_file()
    assert [summary.slug for summary in await store.summaries()] == ["do-it"]


async def test_summaries_from_the_index_carry_the_cost_and_whether_it_was_simulated(
    store: FileTaskStore, tmp_path: Path
) -> None:
    scripted = await store.create("Try it")
    await store.save_dispatch(
        scripted.slug, make_record("a1", status="completed", cost_usd=0.5, cost_simulated=True)
    )
    paid = await store.create("Ship it")
    await store.save_dispatch(paid.slug, make_record("a2", status="completed", cost_usd=0.25))

    again = FileTaskStore(tmp_path)  # answered from the index another store wrote
    try:
        listed = {s.slug: (s.cost_usd, s.cost_simulated) for s in await again.summaries()}
    finally:
        await again.close()

    assert listed == {"try-it": (0.5, True), "ship-it": (0.25, False)}


async def test_a_hand_edit_shows_in_summaries_even_at_the_same_size(
    store: FileTaskStore, tmp_path: Path
) -> None:
    slug = (await store.create("Do it")).slug
    await store.summaries()

    edit(tmp_path / slug / "task.json", lambda data: data.update(description="Do IT"))

    assert [summary.description for summary in await store.summaries()] == ["Do IT"]


async def test_a_task_folder_pulled_from_git_is_found_everywhere(
    store: FileTaskStore, tmp_path: Path
) -> None:
    other = FileTaskStore(tmp_path / "elsewhere")
    slug = (await other.create("Pulled", ThreadRef("C9", "9.9"))).slug
    await other.save_dispatch(slug, make_record("pulled-1"))
    await other.close()
    await store.create("Local")
    await store.summaries()

    shutil.copytree(tmp_path / "elsewhere" / slug, tmp_path / slug)

    assert slug in [summary.slug for summary in await store.summaries()]
    assert (await store.record("pulled-1")).agent_id == "pulled-1"
    found = await store.find_by_thread(ThreadRef("C9", "9.9"))
    assert found is not None and found.slug == slug
    assert [(s, r.agent_id) for s, r in await store.unfinished()] == [(slug, "pulled-1")]


async def test_a_removed_task_folder_disappears_from_every_answer(
    store: FileTaskStore, tmp_path: Path
) -> None:
    slug = (await store.create("Gone", ThreadRef("C1", "1.1"))).slug
    await store.save_dispatch(slug, make_record("a1"))
    await store.summaries()

    shutil.rmtree(tmp_path / slug)

    assert await store.summaries() == []
    assert await store.find_by_thread(ThreadRef("C1", "1.1")) is None
    assert await store.unfinished() == []
    with pytest.raises(AgentNotFoundError):
        await store.record("a1")


async def test_a_crash_between_task_json_and_the_index_is_repaired_on_the_next_read(
    store: FileTaskStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    slug = (await store.create("Do it")).slug
    await store.summaries()

    def crash(self: TaskIndex, task: Task, print_: Fingerprint) -> None:
        return None  # the process died right after task.json was replaced

    monkeypatch.setattr(TaskIndex, "put", crash)
    await store.save_dispatch(slug, make_record("a1"))
    await store.bind_thread(slug, ThreadRef("C1", "1.1"))
    monkeypatch.undo()

    assert (await store.summaries())[0].dispatch_count == 1
    assert (await store.record("a1")).agent_id == "a1"
    assert await store.find_by_thread(ThreadRef("C1", "1.1")) is not None


async def test_record_comes_from_task_json_not_from_the_index(
    store: FileTaskStore, tmp_path: Path
) -> None:
    slug = (await store.create("Do it")).slug
    await store.save_dispatch(slug, make_record("a1"))

    edit(
        tmp_path / slug / "task.json",
        lambda data: data["dispatches"][0].update(status="killed", error="by hand"),
    )

    record = await store.record("a1")
    assert (record.status, record.error) == ("killed", "by hand")


async def test_a_thread_moved_by_hand_is_found_at_its_new_place(
    store: FileTaskStore, tmp_path: Path
) -> None:
    slug = (await store.create("Do it", ThreadRef("C1", "1.1"))).slug
    await store.find_by_thread(ThreadRef("C1", "1.1"))

    edit(
        tmp_path / slug / "task.json",
        lambda data: data.update(thread={"channel": "C2", "threadTs": "2.2"}),
    )

    assert await store.find_by_thread(ThreadRef("C1", "1.1")) is None
    found = await store.find_by_thread(ThreadRef("C2", "2.2"))
    assert found is not None and found.slug == slug


async def test_unfinished_follows_a_hand_edit_that_finishes_a_dispatch(
    store: FileTaskStore, tmp_path: Path
) -> None:
    slug = (await store.create("Do it")).slug
    await store.save_dispatch(slug, make_record("a1"))
    await store.save_dispatch(slug, make_record("a2"))

    edit(tmp_path / slug / "task.json", lambda data: data["dispatches"][0].update(status="failed"))

    assert [record.agent_id for _, record in await store.unfinished()] == ["a2"]


async def test_a_warm_index_reads_no_task_file_and_a_hand_edit_rereads_only_that_one(
    store: FileTaskStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    slugs = [(await store.create(f"Task {n}")).slug for n in range(5)]
    read: list[Path] = []

    def counting_read(file: Path, *, slug: str) -> Any:
        read.append(file)
        return read_task_file(file, slug=slug)

    monkeypatch.setattr(harness.tasks.index, "read_task_file", counting_read)
    assert len(await store.summaries()) == 5
    assert read == []

    edit(tmp_path / slugs[2] / "task.json", lambda data: data.update(description="edited"))
    await store.summaries()

    assert read == [tmp_path / slugs[2] / "task.json"]


async def test_a_deleted_index_is_rebuilt_from_the_task_files(
    store: FileTaskStore, tmp_path: Path
) -> None:
    slug = (await store.create("Do it", ThreadRef("C1", "1.1"))).slug
    await store.save_dispatch(slug, make_record("a1"))
    before = await store.summaries()
    await store.close()

    for file in tmp_path.glob(".index.sqlite3*"):
        file.unlink()

    fresh = FileTaskStore(tmp_path)
    assert (await fresh.record("a1")).agent_id == "a1"
    assert await fresh.summaries() == before
    await fresh.close()


async def test_a_corrupt_index_is_rebuilt_with_a_warning(
    store: FileTaskStore, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    slug = (await store.create("Do it", ThreadRef("C1", "1.1"))).slug
    await store.save_dispatch(slug, make_record("a1"))
    before = await store.summaries()
    await store.close()

    (tmp_path / ".index.sqlite3").write_bytes(b"this is not a database" * 100)

    fresh = FileTaskStore(tmp_path)
    with caplog.at_level(logging.WARNING):
        assert await fresh.summaries() == before
    assert "corrupt" in caplog.text and ".index.sqlite3" in caplog.text
    assert (await fresh.record("a1")).agent_id == "a1"
    await fresh.close()


async def test_an_unusable_index_falls_back_to_reading_the_task_files(
    store: FileTaskStore, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    await store.create("First")
    await store.close()
    (tmp_path / ".index.sqlite3").unlink()
    (tmp_path / ".index.sqlite3").mkdir()  # SQLite cannot open a folder

    fresh = FileTaskStore(tmp_path)
    with caplog.at_level(logging.WARNING):
        second = await fresh.create("Second")
        assert [summary.slug for summary in await fresh.summaries()] == [second.slug, "first"]
    assert "index" in caplog.text
    await fresh.close()


async def test_two_stores_on_one_folder_see_each_others_writes(
    store: FileTaskStore, tmp_path: Path
) -> None:
    other = FileTaskStore(tmp_path)
    slug = (await store.create("Shared")).slug
    assert [summary.slug for summary in await other.summaries()] == [slug]

    await other.save_dispatch(slug, make_record("a1", status="completed"))

    assert (await store.summaries())[0].last_status == "completed"
    assert (await store.record("a1")).status == "completed"
    await other.close()


async def test_spending_sees_at_once_what_another_process_saves_and_the_files_at_first(
    store: FileTaskStore, tmp_path: Path
) -> None:
    # The first read catches up with the files (a task written before any index).
    task = Task("before", "2026-11-01T10:00:00Z", requester="U1",
                dispatches=(make_record("a0", cost_usd=1.0, status="completed",
                                        started_at="2026-11-02T10:00:00Z"),))  # fmt: skip
    (tmp_path / "before").mkdir()
    (tmp_path / "before" / "task.json").write_bytes(dump_task(task))
    assert [row.agent_id for row in await store.spending("2026-11-01")] == ["a0"]
    other = FileTaskStore(tmp_path)  # another process's store, on the same folder
    try:
        slug = (await other.create("theirs", requester="U2")).slug
        await other.save_dispatch(slug, make_record("a1", budget_usd=2.0,
                                                    started_at="2026-11-03T10:00:00Z"))  # fmt: skip
    finally:
        await other.close()

    rows = {row.agent_id: row for row in await store.spending("2026-11-01")}

    assert rows["a1"].held_usd == 2.0 and rows["a1"].person == "U2"
