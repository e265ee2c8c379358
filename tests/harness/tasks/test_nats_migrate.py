"""``harness store migrate``: every task copied between the tasks folder and a real
nats-server, verified, and finished by a second run after an interruption."""

from __future__ import annotations

import asyncio
import hashlib
from pathlib import Path

import pytest

from harness.config.store_schema import StoreSettings
from harness.tasks.files import FileTaskStore
from harness.tasks.model import Decision, ThreadRef
from harness.tasks.nats_migrate import FolderSide, NatsSide, migrate
from harness.tasks.nats_store import NatsTaskStore
from harness.testing.records import make_record
from tests.harness.tasks.nats_fixtures import module_server, settings_for

pytestmark = [pytest.mark.anyio, pytest.mark.nats]
server = module_server()


async def fill(tasks_dir: Path, count: int) -> None:
    store = FileTaskStore(tasks_dir)
    try:
        for n in range(count):
            slug = (await store.create(f"Task {n}", ThreadRef("C1", f"{n}.1"))).slug
            await store.save_dispatch(slug, make_record(f"a{n}", status="completed"))
            await store.add_decision(slug, Decision("Use REST", "simpler", "2026-01-01T10:00Z"))
            for line in range(3):
                store.append_jsonl(slug, f"journals/a{n}.jsonl", {"n": line, "text": "héllo"})
            store.append_jsonl(slug, "audit.jsonl", {"tool": "Bash"})
            await store.write_text(slug, f"diffs/a{n}.diff", f"+ line {n} ✓\n")
    finally:
        await store.close()


def fingerprint(folder: Path) -> dict[str, str]:
    """Every file under ``folder`` (the index and locks aside) by its content."""
    return {
        path.relative_to(folder).as_posix(): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(folder.rglob("*"))
        if path.is_file() and not path.name.startswith(".")
    }


async def test_an_interrupted_migration_to_nats_resumes_and_loses_nothing(
    tmp_path: Path, nats_url: str
) -> None:
    tasks_dir = tmp_path / "tasks"
    await fill(tasks_dir, 6)
    before = fingerprint(tasks_dir)
    settings = settings_for(nats_url)
    store = NatsTaskStore(settings)
    copied: list[str] = []
    third = asyncio.Event()

    def say(line: str) -> None:
        copied.append(line)
        if len(copied) == 3:
            third.set()

    try:
        first = asyncio.ensure_future(migrate(FolderSide(tasks_dir), NatsSide(store), say))
        await asyncio.wait_for(third.wait(), 30)
        first.cancel()  # midway: the fourth task is under way
        with pytest.raises(asyncio.CancelledError):
            await first
        assert len(await store.summaries()) in (3, 4)

        done = await migrate(FolderSide(tasks_dir), NatsSide(store), print)

        assert done.ok and len(done.already) >= 3 and len(done.copied) + len(done.already) == 6
        assert fingerprint(tasks_dir) == before  # the source is never changed
        again = await migrate(FolderSide(tasks_dir), NatsSide(store), print)
        assert (again.copied, len(again.already)) == ([], 6)
    finally:
        await store.close()

    # What a user of the NATS store sees: every task, log and file as the folder had them.
    files, nats = FileTaskStore(tasks_dir), NatsTaskStore(settings)
    try:
        assert await nats.list() == await files.list()
        assert await nats.summaries() == await files.summaries()
        for n in range(6):
            slug = f"task-{n}"
            for name in (f"journals/a{n}.jsonl", "audit.jsonl"):
                assert await nats.read_jsonl(slug, name) == await files.read_jsonl(slug, name)
            assert await nats.read_text(slug, f"diffs/a{n}.diff") == f"+ line {n} ✓\n"
            found = await nats.find_by_thread(ThreadRef("C1", f"{n}.1"))
            assert found is not None and found.slug == slug
            assert (await nats.record(f"a{n}")).status == "completed"
    finally:
        await files.close()
        await nats.close()


async def test_a_migration_back_to_a_folder_gives_the_same_tasks(
    tmp_path: Path, nats_url: str
) -> None:
    await fill(tmp_path / "tasks", 3)
    settings = settings_for(nats_url)
    nats = NatsTaskStore(settings)
    try:
        assert (await migrate(FolderSide(tmp_path / "tasks"), NatsSide(nats), print)).ok

        done = await migrate(NatsSide(nats), FolderSide(tmp_path / "back"), print)

        assert (len(done.copied), done.ok) == (3, True)
        assert fingerprint(tmp_path / "back") == fingerprint(tmp_path / "tasks")
    finally:
        await nats.close()


async def test_another_task_of_the_same_name_is_left_alone_and_reported(
    tmp_path: Path, nats_url: str
) -> None:
    await fill(tmp_path / "tasks", 1)
    nats = NatsTaskStore(StoreSettings(kind="nats", url=nats_url, prefix=settings_for("").prefix))
    try:
        theirs = await nats.create("Task 0")  # made there, not copied: another task

        done = await migrate(FolderSide(tmp_path / "tasks"), NatsSide(nats), print)

        assert (done.conflicts, done.ok) == (["task-0"], False)
        assert await nats.get("task-0") == theirs
    finally:
        await nats.close()
