"""task.json as the file store writes it: the documented keys, readable by teammates, written
atomically, and a corrupt or wrong file named with the fix."""

from __future__ import annotations

import json
import logging
import os
import stat
from pathlib import Path

import pytest

from harness.errors import HarnessError
from harness.tasks.model import AgentResult, Decision, Feedback, Progress, ThreadRef
from harness.tasks.store import FileTaskStore, journal_file_name
from harness.testing.records import make_record

pytestmark = pytest.mark.anyio


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
