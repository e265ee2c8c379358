from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import os
import subprocess
import sys
import threading
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from harness.errors import HarnessError, InvalidSlugError, TaskNotFoundError
from harness.results import AgentResult, Decision, DispatchRecord, Progress, ThreadRef
from harness.tasks import (
    FileTaskStore,
    MemoryTaskStore,
    TaskStore,
    journal_file_name,
    make_slug,
    validate_slug,
)

REPO = Path(__file__).resolve().parents[2]


def record(agent_id: str, **changes: Any) -> DispatchRecord:
    base = DispatchRecord(
        agent_id=agent_id,
        role="developer",
        cwd="/work",
        model=None,
        started_at="2026-01-01T10:00:00Z",
        status="running",
        journal_file=f"journals/{agent_id}.jsonl",
    )
    return dataclasses.replace(base, **changes)


STORES: dict[str, Callable[[Path], TaskStore]] = {
    "file": lambda tmp: FileTaskStore(tmp / "tasks"),
    "memory": lambda tmp: MemoryTaskStore(tmp / "journals"),
}


@pytest.fixture(params=sorted(STORES))
def store(request: pytest.FixtureRequest, tmp_path: Path) -> TaskStore:
    return STORES[request.param](tmp_path)


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


# ------------------------------------------------------------------ conformance (both stores)


def test_create_then_get_returns_the_same_task(store: TaskStore) -> None:
    thread = ThreadRef("C1", "1700000000.000100")
    task = store.create("Add a settings page", thread)

    assert task.slug == "add-a-settings-page"
    assert task.description == "Add a settings page"
    assert task.thread == thread
    assert task.dispatches == ()
    assert datetime.fromisoformat(task.created).utcoffset() is not None
    assert store.get(task.slug) == task


def test_create_makes_slugs_unique(store: TaskStore) -> None:
    slugs = [store.create("Fix the bug").slug for _ in range(3)]

    assert slugs == ["fix-the-bug", "fix-the-bug-2", "fix-the-bug-3"]


def test_get_unknown_slug_raises_task_not_found(store: TaskStore) -> None:
    with pytest.raises(TaskNotFoundError):
        store.get("no-such-task")


@pytest.mark.parametrize("slug", ["../x", "../../etc", "a/../b", "/tmp"])
def test_path_traversal_slugs_are_rejected_everywhere(store: TaskStore, slug: str) -> None:
    with pytest.raises(InvalidSlugError):
        store.get(slug)
    with pytest.raises(InvalidSlugError):
        store.save_dispatch(slug, record("a1"))
    with pytest.raises(InvalidSlugError):
        store.journal_path(slug, "a1")
    with pytest.raises(InvalidSlugError):
        store.append_jsonl(slug, "audit.jsonl", {"x": 1})
    with pytest.raises(InvalidSlugError):
        store.bind_thread(slug, ThreadRef("C", "1"))


def test_save_dispatch_inserts_then_replaces_by_agent_id(store: TaskStore) -> None:
    slug = store.create("Do it").slug
    store.save_dispatch(slug, record("a1"))
    store.save_dispatch(slug, record("a2"))
    done = record("a1", status="completed", result=AgentResult("done", ("x.py",)))

    task = store.save_dispatch(slug, done)

    assert [d.agent_id for d in task.dispatches] == ["a1", "a2"]
    assert task.dispatches[0] == done
    assert store.get(slug) == task


def test_save_dispatch_on_a_missing_task_raises_task_not_found(store: TaskStore) -> None:
    with pytest.raises(TaskNotFoundError):
        store.save_dispatch("missing", record("a1"))


def test_bind_thread_then_find_by_thread(store: TaskStore) -> None:
    slug = store.create("Do it").slug
    store.create("Other")
    thread = ThreadRef("C1", "111.222")

    bound = store.bind_thread(slug, thread)

    assert bound.thread == thread
    assert store.find_by_thread(thread) == bound
    assert store.find_by_thread(ThreadRef("C1", "999.000")) is None


def test_list_returns_newest_first(store: TaskStore) -> None:
    for name in ("first", "second", "third"):
        store.create(name)

    assert [task.slug for task in store.list()] == ["third", "second", "first"]


def test_journal_path_is_under_the_task_folder_and_its_folder_exists(store: TaskStore) -> None:
    slug = store.create("Do it").slug

    path = store.journal_path(slug, "dev-1")

    assert path.name == "dev-1.jsonl"
    assert path.parent.is_dir()
    assert path.relative_to(path.parent.parent).as_posix() == "journals/dev-1.jsonl"


def test_journal_path_rejects_an_agent_id_that_escapes(store: TaskStore) -> None:
    slug = store.create("Do it").slug

    with pytest.raises(HarnessError):
        store.journal_path(slug, "../evil")


def test_append_jsonl_appends_utf8_lines(store: TaskStore) -> None:
    slug = store.create("Do it").slug
    journal = store.journal_path(slug, "dev-1")

    store.append_jsonl(slug, "journals/dev-1.jsonl", {"text": "héllo ✓"})
    store.append_jsonl(slug, "journals/dev-1.jsonl", {"n": 2})

    lines = journal.read_text(encoding="utf-8").splitlines()
    assert [json.loads(line) for line in lines] == [{"text": "héllo ✓"}, {"n": 2}]


@pytest.mark.parametrize(
    "name", ["../x.jsonl", "/tmp/x.jsonl", "a/b/c.jsonl", "journals/../../x", ".lock", "task.json"]
)
def test_append_jsonl_rejects_names_outside_the_task_folder(store: TaskStore, name: str) -> None:
    slug = store.create("Do it").slug

    with pytest.raises(HarnessError):
        store.append_jsonl(slug, name, {"x": 1})


def test_three_threads_saving_dispatches_at_once_keep_all_three(store: TaskStore) -> None:
    slug = store.create("Busy task").slug
    barrier = threading.Barrier(3)

    def save(agent_id: str) -> None:
        barrier.wait(timeout=10)
        store.save_dispatch(slug, record(agent_id))

    threads = [threading.Thread(target=save, args=(f"a{i}",)) for i in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=10)

    assert sorted(d.agent_id for d in store.get(slug).dispatches) == ["a0", "a1", "a2"]


@pytest.mark.anyio
async def test_asyncio_tasks_saving_through_worker_threads_keep_every_record(
    store: TaskStore,
) -> None:
    slug = store.create("Async task").slug

    await asyncio.gather(
        *(asyncio.to_thread(store.save_dispatch, slug, record(f"a{i}")) for i in range(10))
    )

    assert len(store.get(slug).dispatches) == 10


# ------------------------------------------------------------------ file store specifics


def test_task_json_has_exactly_the_documented_camel_case_keys(tmp_path: Path) -> None:
    store = FileTaskStore(tmp_path)
    slug = store.create("Do it", ThreadRef("C1", "1.2")).slug
    full = record(
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
        progress=Progress("half way", "2026-01-01T10:02:00Z", 50.0),
    )
    store.save_dispatch(slug, full)
    store.add_decision(slug, Decision("Use REST", "simpler", "2026-01-01T10:03:00Z", "a1", "pm"))

    data = json.loads((tmp_path / slug / "task.json").read_text(encoding="utf-8"))

    assert list(data) == ["slug", "created", "description", "thread", "dispatches", "decisions"]
    assert data["thread"] == {"channel": "C1", "threadTs": "1.2"}
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
            "turns": 4,
            "durationMs": 1234,
            "result": {"summary": "s", "changes": ["c"], "issues": ["i"], "questions": ["q?"]},
            "error": "boom",
            "lastText": "last",
            "hostPid": 42,
            "progress": {"message": "half way", "percent": 50.0, "at": "2026-01-01T10:02:00Z"},
        }
    ]
    assert data["decisions"] == [
        {
            "title": "Use REST",
            "body": "simpler",
            "at": "2026-01-01T10:03:00Z",
            "agentId": "a1",
            "role": "pm",
        }
    ]
    assert store.get(slug).dispatches == (full,)
    assert store.get(slug).decisions[0].title == "Use REST"


def test_task_without_thread_stores_null(tmp_path: Path) -> None:
    store = FileTaskStore(tmp_path)
    slug = store.create("Do it").slug

    assert json.loads((tmp_path / slug / "task.json").read_text())["thread"] is None


def test_absolute_journal_path_is_stored_relative_to_the_task_folder(tmp_path: Path) -> None:
    store = FileTaskStore(tmp_path)
    slug = store.create("Do it").slug
    journal = store.journal_path(slug, "a1")

    task = store.save_dispatch(slug, record("a1", journal_file=str(journal)))

    assert task.dispatches[0].journal_file == "journals/a1.jsonl"


def test_writes_leave_no_temp_files(tmp_path: Path) -> None:
    store = FileTaskStore(tmp_path)
    slug = store.create("Do it").slug
    for index in range(5):
        store.save_dispatch(slug, record(f"a{index}"))
    store.bind_thread(slug, ThreadRef("C", "1"))

    assert sorted(p.name for p in (tmp_path / slug).iterdir()) == [".lock", "task.json"]


def test_failed_write_keeps_the_old_file_and_removes_the_temp_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = FileTaskStore(tmp_path)
    slug = store.create("Do it").slug
    store.save_dispatch(slug, record("a1"))
    before = (tmp_path / slug / "task.json").read_bytes()

    def failing_replace(src: object, dst: object) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", failing_replace)
    with pytest.raises(OSError, match="disk full"):
        store.save_dispatch(slug, record("a2"))
    monkeypatch.undo()

    assert (tmp_path / slug / "task.json").read_bytes() == before
    assert sorted(p.name for p in (tmp_path / slug).iterdir()) == [".lock", "task.json"]


def test_corrupt_task_json_names_the_file_and_the_fix(tmp_path: Path) -> None:
    store = FileTaskStore(tmp_path)
    slug = store.create("Do it").slug
    (tmp_path / slug / "task.json").write_text("{not json", encoding="utf-8")

    with pytest.raises(HarnessError) as caught:
        store.get(slug)

    assert str(tmp_path / slug / "task.json") in caught.value.message
    assert "corrupt" in caught.value.message
    assert caught.value.fix


def test_task_json_with_a_wrong_field_type_is_reported_as_corrupt(tmp_path: Path) -> None:
    store = FileTaskStore(tmp_path)
    slug = store.create("Do it").slug
    store.save_dispatch(slug, record("a1"))
    file = tmp_path / slug / "task.json"
    data = json.loads(file.read_text())
    data["dispatches"][0]["turns"] = "four"
    file.write_text(json.dumps(data))

    with pytest.raises(HarnessError, match=r"dispatches\[0\]\.turns"):
        store.get(slug)


def test_list_skips_corrupt_tasks_with_a_warning_and_folders_without_task_json(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    store = FileTaskStore(tmp_path)
    good = store.create("Good").slug
    bad = store.create("Bad").slug
    (tmp_path / bad / "task.json").write_text("[]", encoding="utf-8")
    (tmp_path / "half-created").mkdir()

    with caplog.at_level(logging.WARNING, logger="harness.tasks"):
        tasks = store.list()

    assert [task.slug for task in tasks] == [good]
    assert bad in caplog.text


def test_list_of_a_missing_tasks_folder_is_empty(tmp_path: Path) -> None:
    assert FileTaskStore(tmp_path / "nothing-yet").list() == []


def test_concurrent_creates_with_one_description_get_distinct_slugs(tmp_path: Path) -> None:
    store = FileTaskStore(tmp_path)
    barrier = threading.Barrier(4)
    slugs: list[str] = []

    def create() -> None:
        barrier.wait(timeout=10)
        slugs.append(store.create("Same request").slug)

    threads = [threading.Thread(target=create) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=10)

    assert sorted(slugs) == ["same-request", "same-request-2", "same-request-3", "same-request-4"]


WRITER = """
import sys
from pathlib import Path
from harness.results import DispatchRecord
from harness.tasks import FileTaskStore

tasks_dir, slug, prefix = sys.argv[1:4]
store = FileTaskStore(Path(tasks_dir))
print("ready", flush=True)
sys.stdin.readline()  # start together with the other writer
for index in range(20):
    store.save_dispatch(slug, DispatchRecord(
        agent_id=f"{prefix}-{index}", role="developer", cwd=".", model=None,
        started_at="2026-01-01T00:00:00Z", status="completed", journal_file="j",
    ))
"""


def test_two_processes_saving_20_records_each_keep_all_40(tmp_path: Path) -> None:
    store = FileTaskStore(tmp_path)
    slug = store.create("Shared task").slug
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

    ids = {d.agent_id for d in store.get(slug).dispatches}
    assert len(ids) == 40
    assert ids == {f"{p}-{i}" for p in ("p1", "p2") for i in range(20)}
