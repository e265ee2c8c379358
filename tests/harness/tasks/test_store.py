from __future__ import annotations

import json
import logging
import os
import stat
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from harness.errors import HarnessError, InvalidSlugError
from harness.tasks.model import AgentResult, Decision, Feedback, Progress, ThreadRef
from harness.tasks.store import (
    FileTaskStore,
    MemoryTaskStore,
    Store,
    journal_file_name,
    make_slug,
    validate_slug,
)
from harness.testing.records import make_record
from tests.harness.tasks.suites import (
    RunLivenessConformance,
    TaskFilesConformance,
    TaskStoreConformance,
    two_processes_take_up_a_stopped_run_s_agent_once,
)

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


@pytest.fixture
async def files(tmp_path: Path) -> AsyncIterator[FileTaskStore]:
    store = FileTaskStore(tmp_path)
    yield store
    await store.close()


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


# ------------------------------------------------------------------ task.json on disk


async def test_task_json_has_exactly_the_documented_camel_case_keys(
    files: FileTaskStore, tmp_path: Path
) -> None:
    slug = (
        await files.create("Do it", ThreadRef("C1", "1.2"), repository="web", requester="U1")
    ).slug
    full = make_record(
        "a1",
        model="sonnet",
        prompt="do it",
        parent_id="pm-1",
        completed_at="2026-01-01T10:05:00Z",
        status="failed",
        cost_usd=0.25,
        turns=4,
        duration_ms=1234,
        result=AgentResult("s", ("c",), ("i",), ("q?",)),
        error="boom",
        last_text="last",
        host_pid=42,
        run_id="0123456789abcdef",
        progress=Progress("half way", "2026-01-01T10:02:00Z", 50.0),
        branch="harness/do-it",
        head_commit="0123abc",
        diff_stat=" a.py | 2 +-\n 1 file changed, 1 insertion(+), 1 deletion(-)",
        diff_file="diffs/a1.diff",
        undelivered="channel_not_found",
        feedback=(Feedback("U1", "good", "2026-01-01T10:06:00Z"),),
        requested_by="U7",
        budget_usd=3.0,
    )
    await files.save_dispatch(slug, full)
    await files.add_decision(
        slug, Decision("Use REST", "simpler", "2026-01-01T10:03:00Z", "a1", "pm")
    )

    data = json.loads((tmp_path / slug / "task.json").read_text(encoding="utf-8"))

    assert list(data) == [
        "slug",
        "created",
        "description",
        "thread",
        "repository",
        "requester",
        "allowed",
        "pullRequest",
        "trigger",
        "limitsRaisedBy",
        "dispatches",
        "decisions",
    ]
    assert data["thread"] == {"channel": "C1", "threadTs": "1.2"}
    assert data["repository"] == "web"
    assert data["requester"] == "U1"
    assert data["created"].endswith("Z")
    assert data["dispatches"] == [
        {
            "agentId": "a1",
            "role": "developer",
            "cwd": "/work",
            "model": "sonnet",
            "prompt": "do it",
            "parentId": "pm-1",
            "startedAt": "2026-01-01T10:00:00Z",
            "completedAt": "2026-01-01T10:05:00Z",
            "status": "failed",
            "journalFile": "journals/a1.jsonl",
            "costUsd": 0.25,
            "costSimulated": False,
            "turns": 4,
            "durationMs": 1234,
            "result": {
                "summary": "s",
                "changes": ["c"],
                "issues": ["i"],
                "questions": ["q?"],
                "proposedNotes": [],
            },
            "error": "boom",
            "lastText": "last",
            "hostPid": 42,
            "runId": "0123456789abcdef",
            "progress": {"message": "half way", "percent": 50.0, "at": "2026-01-01T10:02:00Z"},
            "branch": "harness/do-it",
            "headCommit": "0123abc",
            "diffStat": " a.py | 2 +-\n 1 file changed, 1 insertion(+), 1 deletion(-)",
            "diffFile": "diffs/a1.diff",
            "undelivered": "channel_not_found",
            "feedback": [{"user": "U1", "value": "good", "at": "2026-01-01T10:06:00Z"}],
            "requestedBy": "U7",
            "budgetUsd": 3.0,
            "plan": False,
        }
    ]
    assert list(data["dispatches"][0]) == list(
        json.loads((tmp_path / slug / "task.json").read_text())["dispatches"][0]
    )
    assert data["decisions"] == [
        {
            "title": "Use REST",
            "body": "simpler",
            "at": "2026-01-01T10:03:00Z",
            "agentId": "a1",
            "role": "pm",
        }
    ]
    task = await files.get(slug)
    assert task.repository == "web"
    assert task.dispatches == (full,)
    assert task.decisions[0].title == "Use REST"


async def test_task_without_thread_stores_null(files: FileTaskStore, tmp_path: Path) -> None:
    slug = (await files.create("Do it")).slug

    assert json.loads((tmp_path / slug / "task.json").read_text())["thread"] is None


async def test_task_json_is_readable_by_teammates(files: FileTaskStore, tmp_path: Path) -> None:
    slug = (await files.create("Do it")).slug

    mode = stat.S_IMODE((tmp_path / slug / "task.json").stat().st_mode)
    assert mode == 0o644


async def test_absolute_journal_path_is_stored_relative_to_the_task_folder(
    files: FileTaskStore, tmp_path: Path
) -> None:
    slug = (await files.create("Do it")).slug
    journal = tmp_path / slug / journal_file_name("a1")

    task = await files.save_dispatch(slug, make_record("a1", journal_file=str(journal)))

    assert task.dispatches[0].journal_file == "journals/a1.jsonl"


async def test_writes_leave_no_temp_files(files: FileTaskStore, tmp_path: Path) -> None:
    slug = (await files.create("Do it")).slug
    for index in range(5):
        await files.save_dispatch(slug, make_record(f"a{index}"))
    await files.bind_thread(slug, ThreadRef("C", "1"))

    assert sorted(p.name for p in (tmp_path / slug).iterdir()) == [".lock", "task.json"]


async def test_failed_write_keeps_the_old_file_and_removes_the_temp_file(
    files: FileTaskStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    slug = (await files.create("Do it")).slug
    await files.save_dispatch(slug, make_record("a1"))
    before = (tmp_path / slug / "task.json").read_bytes()

    def failing_replace(src: object, dst: object) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", failing_replace)
    with pytest.raises(OSError, match="disk full"):
        await files.save_dispatch(slug, make_record("a2"))
    monkeypatch.undo()

    assert (tmp_path / slug / "task.json").read_bytes() == before
    assert sorted(p.name for p in (tmp_path / slug).iterdir()) == [".lock", "task.json"]
    assert (await files.summaries())[0].dispatch_count == 1


# ------------------------------------------------------------------ corrupt files


async def test_corrupt_task_json_names_the_file_and_the_fix(
    files: FileTaskStore, tmp_path: Path
) -> None:
    slug = (await files.create("Do it")).slug
    (tmp_path / slug / "task.json").write_text("{not json", encoding="utf-8")

    with pytest.raises(HarnessError) as caught:
        await files.get(slug)

    assert str(tmp_path / slug / "task.json") in caught.value.message
    assert "corrupt" in caught.value.message
    assert "task.json" in caught.value.fix


async def test_task_json_with_a_wrong_field_type_names_the_field_and_what_was_found(
    files: FileTaskStore, tmp_path: Path
) -> None:
    slug = (await files.create("Do it")).slug
    await files.save_dispatch(slug, make_record("a1"))
    file = tmp_path / slug / "task.json"
    data = json.loads(file.read_text())
    data["dispatches"][0]["turns"] = "four"
    file.write_text(json.dumps(data))

    with pytest.raises(HarnessError, match=r"dispatches\[0\]\.turns") as caught:
        await files.get(slug)

    assert "found a string ('four')" in caught.value.message
    assert "dispatches[0].turns" in caught.value.fix


async def test_listings_skip_corrupt_tasks_with_a_warning_naming_the_file(
    files: FileTaskStore, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    good = (await files.create("Good")).slug
    bad = (await files.create("Bad")).slug
    (tmp_path / bad / "task.json").write_text("[]", encoding="utf-8")
    (tmp_path / "half-created").mkdir()

    with caplog.at_level(logging.WARNING):
        tasks = await files.list()
        summaries = await files.summaries()

    assert [task.slug for task in tasks] == [good]
    assert [summary.slug for summary in summaries] == [good]
    assert str(tmp_path / bad / "task.json") in caplog.text


async def test_listing_a_missing_tasks_folder_is_empty_and_creates_nothing(
    tmp_path: Path,
) -> None:
    store = FileTaskStore(tmp_path / "nothing-yet")

    assert await store.list() == []
    assert await store.summaries() == []
    assert await store.find_by_thread(ThreadRef("C", "1")) is None
    await store.close()
    assert not (tmp_path / "nothing-yet").exists()


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
