"""The task stores: the shared conformance suites on the file and memory stores, slugs, where
their files go, several processes on one tasks folder, and deleting tasks."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from harness.errors import HarnessError, InvalidSlugError
from harness.tasks.store import (
    FileTaskStore,
    MemoryTaskStore,
    Store,
    journal_file_name,
    make_slug,
    validate_slug,
)
from harness.testing.records import make_record
from tests.harness.tasks.run_liveness_suite import (
    RunLivenessConformance,
    two_processes_take_up_a_stopped_run_s_agent_once,
)
from tests.harness.tasks.task_files_suite import TaskFilesConformance
from tests.harness.tasks.task_store_suite import TaskStoreConformance

pytestmark = pytest.mark.anyio


REPO = Path(__file__).resolve().parents[3]


class TestFileTaskStore(TaskStoreConformance, TaskFilesConformance, RunLivenessConformance):
    @pytest.fixture
    async def store(self, tmp_path: Path) -> AsyncIterator[Store]:
        store = FileTaskStore(tmp_path / "tasks")
        yield store
        await store.close()


class TestMemoryTaskStore(TaskStoreConformance, TaskFilesConformance, RunLivenessConformance):
    @pytest.fixture
    async def store(self, tmp_path: Path) -> AsyncIterator[Store]:
        store = MemoryTaskStore(tmp_path / "journals")
        yield store
        await store.close()


async def test_two_processes_on_one_tasks_folder_take_up_a_stopped_run_s_agent_once(
    tmp_path: Path,
) -> None:
    first, second = FileTaskStore(tmp_path / "tasks"), FileTaskStore(tmp_path / "tasks")
    try:
        await two_processes_take_up_a_stopped_run_s_agent_once(first, second)
    finally:
        await first.close()
        await second.close()


# ------------------------------------------------------------------ slugs


def test_make_slug_joins_lowercase_words_with_hyphens() -> None:
    assert make_slug("Add a Settings page!", ()) == "add-a-settings-page"


def test_make_slug_drops_punctuation_and_non_ascii() -> None:
    assert (
        make_slug("Don't break the café's API — ünïcode 🚀", ())
        == "dont-break-the-cafes-api-unicode"
    )


def test_make_slug_keeps_at_most_six_words() -> None:
    assert make_slug("one two three four five six seven eight", ()) == "one-two-three-four-five-six"


def test_make_slug_keeps_at_most_48_characters() -> None:
    slug = make_slug("internationalization localization accessibility performance", ())

    assert slug == "internationalization-localization-accessibility"
    assert len(slug) <= 48


def test_make_slug_cuts_a_single_very_long_word() -> None:
    assert make_slug("x" * 100, ()) == "x" * 48


def test_make_slug_falls_back_to_task() -> None:
    assert make_slug("!!! 🚀 ???", ()) == "task"


def test_make_slug_adds_a_counter_when_taken() -> None:
    assert make_slug("Fix bug", {"fix-bug", "fix-bug-2"}) == "fix-bug-3"


@pytest.mark.parametrize("slug", ["a", "fix-bug", "task-2", "0", "a" * 64])
def test_validate_slug_accepts_plain_slugs(slug: str) -> None:
    assert validate_slug(slug) == slug


@pytest.mark.parametrize(
    "slug", ["", "../x", "..", "a/b", "Fix", "-a", "a-", "a b", "a" * 65, "/etc", "a\x00"]
)
def test_validate_slug_rejects_unsafe_slugs(slug: str) -> None:
    with pytest.raises(InvalidSlugError):
        validate_slug(slug)


def test_journal_file_name_is_relative_to_the_task_folder() -> None:
    assert journal_file_name("dev-1") == "journals/dev-1.jsonl"


def test_journal_file_name_rejects_an_agent_id_that_escapes() -> None:
    with pytest.raises(HarnessError):
        journal_file_name("../evil")


# ------------------------------------------------------------------ where the files go


async def test_journal_lines_land_in_the_task_folder_as_utf8(
    files: FileTaskStore, tmp_path: Path
) -> None:
    slug = (await files.create("Do it")).slug

    files.append_jsonl(slug, journal_file_name("dev-1"), {"text": "héllo ✓"})
    await files.flush()

    text = (tmp_path / slug / "journals" / "dev-1.jsonl").read_text(encoding="utf-8")
    assert text == '{"text": "héllo ✓"}\n'


async def test_memory_store_journals_go_under_the_journal_dir(tmp_path: Path) -> None:
    store = MemoryTaskStore(tmp_path / "journals")
    slug = (await store.create("Do it")).slug

    store.append_jsonl(slug, "audit.jsonl", {"n": 1})
    await store.close()

    assert (tmp_path / "journals" / slug / "audit.jsonl").read_text(encoding="utf-8") == (
        '{"n": 1}\n'
    )


# ------------------------------------------------------------------ across processes

WRITER = """
import asyncio
import sys
from pathlib import Path
from harness.tasks.model import DispatchRecord
from harness.tasks.store import FileTaskStore

tasks_dir, slug, prefix = sys.argv[1:4]

async def main() -> None:
    store = FileTaskStore(Path(tasks_dir))
    print("ready", flush=True)
    sys.stdin.readline()  # start together with the other writer
    for index in range(20):
        await store.save_dispatch(slug, DispatchRecord(
            agent_id=f"{prefix}-{index}", role="developer", cwd=".", model=None,
            started_at="2026-01-01T00:00:00Z", status="completed", journal_file="j",
        ))
        store.append_jsonl(slug, "audit.jsonl", {"writer": prefix, "n": index})
    await store.close()

asyncio.run(main())
"""


@pytest.mark.subprocess
async def test_two_processes_saving_20_records_each_keep_all_40(
    files: FileTaskStore, tmp_path: Path
) -> None:
    slug = (await files.create("Shared task")).slug
    writers = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER, str(tmp_path), slug, prefix],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            cwd=REPO,
        )
        for prefix in ("p1", "p2")
    ]
    for writer in writers:
        assert writer.stdout is not None
        assert writer.stdout.readline().strip() == "ready"
    for writer in writers:
        assert writer.stdin is not None
        writer.stdin.write("go\n")
        writer.stdin.close()
    for writer in writers:
        assert writer.wait(timeout=60) == 0
        assert writer.stdout is not None
        writer.stdout.close()

    ids = {d.agent_id for d in (await files.get(slug)).dispatches}
    assert ids == {f"{p}-{i}" for p in ("p1", "p2") for i in range(20)}
    assert (await files.summaries())[0].dispatch_count == 40
    assert (await files.record("p2-19")).agent_id == "p2-19"
    audit = await files.read_jsonl(slug, "audit.jsonl")
    for prefix in ("p1", "p2"):
        assert [e["n"] for e in audit if e["writer"] == prefix] == list(range(20))


# ------------------------------------------------------------------ deleting


async def test_deleting_a_task_removes_its_folder_and_leaves_no_trash(
    files: FileTaskStore, tmp_path: Path
) -> None:
    slug = (await files.create("Do it")).slug
    await files.save_dispatch(slug, make_record("a1", status="completed"))
    files.append_jsonl(slug, "journals/a1.jsonl", {"n": 1})
    await files.flush()

    await files.delete(slug)

    assert not (tmp_path / slug).exists()
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".deleted-")] == []


async def test_a_task_whose_task_json_cannot_be_read_can_still_be_deleted(
    files: FileTaskStore, tmp_path: Path
) -> None:
    slug = (await files.create("Do it")).slug
    (tmp_path / slug / "task.json").write_text("{not json", encoding="utf-8")
    assert [damaged.slug for damaged in await files.damaged()] == [slug]

    await files.delete(slug)

    assert not (tmp_path / slug).exists()
    assert await files.damaged() == []


async def test_a_folder_an_interrupted_delete_left_is_never_listed_and_goes_with_the_next(
    files: FileTaskStore, tmp_path: Path
) -> None:
    # What a crash between the rename and the removal leaves behind.
    leftover = tmp_path / ".deleted-old-task-0a1b2c3d"
    (leftover / "journals").mkdir(parents=True)
    (leftover / "task.json").write_text("{}", encoding="utf-8")
    slug = (await files.create("Do it")).slug

    assert [line.slug for line in await files.summaries()] == [slug]
    await files.delete(slug)

    assert not leftover.exists()
