"""Damaged task.json files: the file store lists them apart (``damaged``), keeps their Slack
thread, never overwrites them, and ``repair`` (``harness repair``) sets them aside and writes
a fresh task.json of what still reads. The same through the ``harness`` command."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

import harness.tasks.index
from harness.errors import TaskDamagedError
from harness.tasks.model import AgentResult, Task, ThreadRef
from harness.tasks.repair import salvage
from harness.tasks.store import FileTaskStore
from harness.tasks.task_json import Fingerprint, dump_task, read_task_file
from harness.testing import spawn
from harness.testing.records import make_record

THREAD = ThreadRef("C1", "1700000000.000100")


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[FileTaskStore]:
    store = FileTaskStore(tmp_path)
    yield store
    await store.close()


async def worked_task(store: FileTaskStore) -> Task:
    """A task bound to THREAD with two finished dispatches and a decision."""
    slug = (await store.create("Fix the footer", THREAD, repository="web")).slug
    await store.save_dispatch(
        slug, make_record("a1", status="completed", result=AgentResult("footer fixed"))
    )
    await store.save_dispatch(slug, make_record("a2", status="completed", turns=3))
    return await store.allow(slug, "Bash(pytest:*)")


def damage(file: Path, change: Callable[[dict[str, Any]], None]) -> None:
    """Edit task.json by hand, a second after the store wrote it (see test_task_index.edit)."""
    before = file.stat().st_mtime_ns
    data = json.loads(file.read_text(encoding="utf-8"))
    change(data)
    write_later(file, json.dumps(data, indent=2).encode("utf-8"), before)


def write_later(file: Path, data: bytes, before: int | None = None) -> None:
    before = file.stat().st_mtime_ns if before is None else before
    file.write_bytes(data)
    os.utime(file, ns=(before + 1_000_000_000, before + 1_000_000_000))


def truncate_after_dispatches(file: Path) -> bytes:
    """Cut task.json off after its dispatches, as a torn write would: returns the old bytes."""
    data = file.read_bytes()
    write_later(file, data[: data.index(b'"decisions"') + 5])
    return data


def forget_index(tasks_dir: Path) -> None:
    for suffix in ("", "-wal", "-shm"):
        (tasks_dir / f".index.sqlite3{suffix}").unlink(missing_ok=True)


def set_status(index: int, value: object) -> Callable[[dict[str, Any]], None]:
    def change(data: dict[str, Any]) -> None:
        data["dispatches"][index]["status"] = value

    return change


pytestmark = pytest.mark.anyio


# ------------------------------------------------------------------ seeing the damage


async def test_a_damaged_task_is_listed_apart_with_its_file_problem_and_thread(
    store: FileTaskStore, tmp_path: Path
) -> None:
    task = await worked_task(store)
    good = await store.create("Other")
    file = tmp_path / task.slug / "task.json"
    damage(file, set_status(1, 42))

    [damaged] = await store.damaged()

    assert [s.slug for s in await store.summaries()] == [good.slug]
    assert (damaged.slug, damaged.file, damaged.thread) == (task.slug, str(file), THREAD)
    assert damaged.problem.startswith("corrupt task file: dispatches[1].status:")
    assert "an integer (42) is not one of: queued, running" in damaged.problem
    assert damaged.repair == f"harness repair {task.slug}"


async def test_reading_a_damaged_task_names_the_file_the_field_and_the_repair(
    store: FileTaskStore, tmp_path: Path
) -> None:
    task = await worked_task(store)
    file = tmp_path / task.slug / "task.json"
    damage(file, set_status(1, 42))

    with pytest.raises(TaskDamagedError) as caught:
        await store.get(task.slug)

    error = caught.value
    assert (error.slug, error.file) == (task.slug, str(file))
    assert f"{file}: corrupt task file: dispatches[1].status" in error.message
    assert f"`harness repair {task.slug}`" in error.fix
    assert "dispatches[1].status by hand" in error.fix


async def test_a_damaged_task_is_never_overwritten(store: FileTaskStore, tmp_path: Path) -> None:
    task = await worked_task(store)
    file = tmp_path / task.slug / "task.json"
    damage(file, set_status(0, "done"))
    before = file.read_bytes()

    with pytest.raises(TaskDamagedError):
        await store.save_dispatch(task.slug, make_record("a3"))
    with pytest.raises(TaskDamagedError):
        await store.bind_thread(task.slug, ThreadRef("C2", "2.2"))

    assert file.read_bytes() == before


@pytest.mark.parametrize(
    "how",
    ["a field of the wrong type", "cut off after its dispatches", "not JSON at all"],
)
async def test_the_thread_of_a_damaged_task_is_not_free(
    store: FileTaskStore, tmp_path: Path, how: str
) -> None:
    task = await worked_task(store)
    await store.find_by_thread(THREAD)  # the index knows the thread
    file = tmp_path / task.slug / "task.json"
    if how == "a field of the wrong type":
        damage(file, set_status(0, None))
    elif how == "cut off after its dispatches":
        truncate_after_dispatches(file)
    else:
        write_later(file, b"\x00\x00\x00")

    with pytest.raises(TaskDamagedError) as caught:
        await store.find_by_thread(THREAD)

    assert caught.value.slug == task.slug
    assert await store.find_by_thread(ThreadRef("C1", "9.9")) is None
    assert [d.thread for d in await store.damaged()] == [THREAD]


@pytest.mark.parametrize("how", ["a field of the wrong type", "cut off after its dispatches"])
async def test_with_the_index_gone_the_thread_is_read_from_what_of_the_file_still_parses(
    tmp_path: Path, how: str
) -> None:
    first = FileTaskStore(tmp_path)
    task = await worked_task(first)
    await first.close()
    file = tmp_path / task.slug / "task.json"
    if how == "a field of the wrong type":
        damage(file, lambda data: data.update(allowed="everything"))
    else:
        truncate_after_dispatches(file)
    forget_index(tmp_path)

    store = FileTaskStore(tmp_path)
    try:
        [damaged] = await store.damaged()
        assert (damaged.slug, damaged.thread) == (task.slug, THREAD)
        with pytest.raises(TaskDamagedError):
            await store.find_by_thread(THREAD)
    finally:
        await store.close()


async def test_damaged_does_not_read_task_files_again_until_they_change(
    store: FileTaskStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    task = await worked_task(store)
    for n in range(3):
        await store.create(f"Other {n}")
    damage(tmp_path / task.slug / "task.json", set_status(0, 1))
    assert len(await store.damaged()) == 1

    reads: list[Path] = []

    def counting(file: Path, *, slug: str) -> tuple[Task, Fingerprint]:
        reads.append(file)
        return read_task_file(file, slug=slug)

    monkeypatch.setattr(harness.tasks.index, "read_task_file", counting)
    assert len(await store.damaged()) == 1
    assert len(await store.summaries()) == 3
    assert reads == []


async def test_with_an_unusable_index_damaged_tasks_are_found_in_the_files(
    tmp_path: Path,
) -> None:
    first = FileTaskStore(tmp_path)
    task = await worked_task(first)
    await first.close()
    truncate_after_dispatches(tmp_path / task.slug / "task.json")
    forget_index(tmp_path)
    (tmp_path / ".index.sqlite3").mkdir()  # SQLite cannot open a folder

    store = FileTaskStore(tmp_path)
    try:
        [damaged] = await store.damaged()
        assert (damaged.slug, damaged.thread) == (task.slug, THREAD)
        assert (await store.repair(task.slug)).repaired
        assert await store.damaged() == []
        assert (await store.get(task.slug)).dispatches == task.dispatches
    finally:
        await store.close()


# ------------------------------------------------------------------ repairing


async def test_repair_sets_the_file_aside_and_keeps_everything_that_still_reads(
    store: FileTaskStore, tmp_path: Path
) -> None:
    task = await worked_task(store)
    file = tmp_path / task.slug / "task.json"
    damage(file, set_status(1, 42))
    damaged_bytes = file.read_bytes()

    report = await store.repair(task.slug)

    assert report.repaired and report.moved_to is not None
    aside = Path(report.moved_to)
    assert aside.parent == file.parent and aside.name.startswith("task.json.damaged-")
    assert aside.read_bytes() == damaged_bytes
    repaired = await store.get(task.slug)
    assert repaired == Task(
        task.slug,
        task.created,
        task.description,
        THREAD,
        dispatches=task.dispatches[:1],
        repository="web",
        allowed=("Bash(pytest:*)",),
    )
    assert "1 dispatch record" in report.kept
    assert f"the Slack thread {THREAD.channel}/{THREAD.thread_ts}" in report.kept
    [dropped] = report.dropped
    assert dropped.startswith("dispatches[1] (status: an integer (42) is not one of: queued")
    assert await store.damaged() == []
    assert [s.slug for s in await store.summaries()] == [task.slug]
    assert await store.find_by_thread(THREAD) == repaired
    assert (await store.record("a1")).result == AgentResult("footer fixed")


async def test_repair_drops_a_bad_optional_field_but_keeps_its_dispatch(
    store: FileTaskStore, tmp_path: Path
) -> None:
    task = await worked_task(store)
    damage(
        tmp_path / task.slug / "task.json",
        lambda data: data["dispatches"][1].update(turns="three"),
    )

    report = await store.repair(task.slug)

    assert (await store.get(task.slug)).dispatches[1].turns is None
    assert [d.agent_id for d in (await store.get(task.slug)).dispatches] == ["a1", "a2"]
    assert report.dropped == (
        "dispatches[1].turns (expected an integer, found a string ('three'))",
    )


async def test_repair_of_a_torn_file_keeps_what_came_before_the_tear(
    store: FileTaskStore, tmp_path: Path
) -> None:
    task = await worked_task(store)
    truncate_after_dispatches(tmp_path / task.slug / "task.json")

    report = await store.repair(task.slug)

    repaired = await store.get(task.slug)
    assert repaired.dispatches == task.dispatches
    assert (repaired.thread, repaired.description, repaired.created) == (
        THREAD,
        task.description,
        task.created,
    )
    assert [d for d in report.dropped if "not valid JSON" in d]


async def test_repair_of_an_empty_file_keeps_the_task_and_says_everything_was_dropped(
    store: FileTaskStore, tmp_path: Path
) -> None:
    slug = (await store.create("Fix it")).slug
    write_later(tmp_path / slug / "task.json", b"")

    report = await store.repair(slug)

    repaired = await store.get(slug)
    assert (repaired.slug, repaired.description, repaired.dispatches) == (slug, "", ())
    assert report.dropped[0].startswith("everything (not valid JSON")
    assert report.dropped[1].startswith("created (missing; set to ")


async def test_each_repair_keeps_its_own_copy_of_the_damaged_file(
    store: FileTaskStore, tmp_path: Path
) -> None:
    task = await worked_task(store)
    file = tmp_path / task.slug / "task.json"
    damage(file, set_status(0, 1))
    first = await store.repair(task.slug)
    damage(file, set_status(0, 2))
    second = await store.repair(task.slug)

    assert first.moved_to != second.moved_to
    asides = sorted(p.name for p in file.parent.glob("task.json.damaged-*"))
    assert len(asides) == 2
    assert '"status": 1' in Path(str(first.moved_to)).read_text()
    assert '"status": 2' in Path(str(second.moved_to)).read_text()


# ------------------------------------------------------------------ salvage, pure


def task_bytes() -> bytes:
    return dump_task(
        Task(
            "do-it",
            "2026-01-01T09:00:00Z",
            "Do it",
            THREAD,
            dispatches=(make_record("a1", prompt="do it"), make_record("a2")),
        )
    )


def test_garbage_in_the_middle_keeps_what_came_before_it() -> None:
    data = task_bytes().replace(b'"status": "running"', b'"status": running', 1)

    found = salvage(data, slug="do-it", file=Path("/t/do-it/task.json"), file_time=0)

    assert (found.task.description, found.task.thread, found.task.dispatches) == (
        "Do it",
        THREAD,
        (),
    )
    assert found.dropped[0].startswith("the rest of the file (not valid JSON from line")
    assert found.dropped[1] == "dispatches[0] (status: missing)"


def test_a_missing_date_and_description_come_from_the_first_dispatch() -> None:
    data = json.loads(task_bytes())
    del data["created"], data["description"]

    found = salvage(
        json.dumps(data).encode(), slug="do-it", file=Path("/t/do-it/task.json"), file_time=0
    )

    assert found.task.created == "2026-01-01T10:00:00Z"
    assert found.task.description == "do it"
    assert "the first dispatch's prompt as the description" in found.kept


# ------------------------------------------------------------------ the harness command


def run_harness(project_dir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return spawn.run(
        [sys.executable, "-m", "harness", *args, "--config", str(project_dir / "config.yaml")],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


@pytest.mark.subprocess
async def test_harness_tasks_show_and_repair_on_a_damaged_task(project_dir: Path) -> None:
    tasks_dir = project_dir / ".agents" / "tasks"
    store = FileTaskStore(tasks_dir)
    task = await worked_task(store)
    good = await store.create("Readable one")
    await store.close()
    file = tasks_dir / task.slug / "task.json"
    damage(file, set_status(1, 42))

    listing = run_harness(project_dir, "tasks")
    assert listing.returncode == 0, listing.stderr
    assert good.slug in listing.stdout
    assert "1 task could not be read:" in listing.stdout
    assert f"  {task.slug}: {file}: corrupt task file: dispatches[1].status" in listing.stdout
    assert f"to repair it, run: harness repair {task.slug}" in listing.stdout

    shown = run_harness(project_dir, "show", task.slug)
    assert shown.returncode == 2
    assert f"{file}: corrupt task file: dispatches[1].status" in shown.stderr
    assert f"fix: run `harness repair {task.slug}`" in shown.stderr

    repaired = run_harness(project_dir, "repair", task.slug)
    assert repaired.returncode == 0, repaired.stderr
    assert f"Repaired task {task.slug}." in repaired.stdout
    assert f"The damaged file is kept as {file}.damaged-" in repaired.stdout
    assert "Kept: created " in repaired.stdout and "1 dispatch record" in repaired.stdout
    assert "Dropped:\n  - dispatches[1] (status: " in repaired.stdout

    assert "could not be read" not in run_harness(project_dir, "tasks").stdout
    assert run_harness(project_dir, "show", task.slug).returncode == 0
    again = run_harness(project_dir, "repair", task.slug)
    assert again.stdout.strip() == f"Task {task.slug} reads fine: nothing to repair."
    assert "harness repair" in run_harness(project_dir, "repair", "--help").stdout
