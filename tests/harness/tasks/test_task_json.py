"""task.json's format: what loads, and what a corrupt file's error tells the user."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from harness.errors import HarnessError
from harness.tasks.model import AgentResult, Decision, Progress, Task, ThreadRef
from harness.tasks.task_json import dump_task, parse_task
from harness.testing.records import make_record

FILE = Path("/tasks/do-it/task.json")

# A task.json as an earlier version wrote it: no prompt, hostPid, progress or decisions keys,
# null cwd and journalFile, and an integer cost.
EARLIER_VERSION = {
    "slug": "do-it",
    "created": "2025-06-01T10:00:00Z",
    "description": "Do it",
    "thread": None,
    "dispatches": [
        {
            "agentId": "a1",
            "role": "developer",
            "cwd": None,
            "model": None,
            "startedAt": "2025-06-01T10:00:01Z",
            "completedAt": "2025-06-01T10:01:00Z",
            "status": "completed",
            "journalFile": None,
            "costUsd": 0,
            "turns": 3,
            "durationMs": 59000,
            "result": {"summary": "done", "changes": [], "issues": [], "questions": []},
            "error": None,
            "lastText": None,
        }
    ],
}


def parse(data: Any, file: Path = FILE) -> Task:
    return parse_task(json.dumps(data).encode(), file=file, slug="do-it")


def problem(data: Any) -> HarnessError:
    with pytest.raises(HarnessError) as caught:
        parse(data)
    return caught.value


def test_a_file_written_by_an_earlier_version_still_loads() -> None:
    task = parse(EARLIER_VERSION)

    [record] = task.dispatches
    assert (record.cwd, record.journal_file, record.prompt) == ("", "", "")
    assert (record.cost_usd, record.host_pid, record.progress) == (0.0, None, None)
    assert record.result == AgentResult("done")
    assert task.decisions == ()


@pytest.mark.parametrize(
    ("key", "where"), [("prompt", "dispatch"), ("feedback", "dispatch"), ("description", "task"),
                       ("allowed", "task"), ("dispatches", "task"), ("decisions", "task")]
)  # fmt: skip
def test_a_null_that_earlier_versions_wrote_reads_as_the_default(key: str, where: str) -> None:
    data = json.loads(json.dumps(EARLIER_VERSION))
    (data["dispatches"][0] if where == "dispatch" else data)[key] = None

    task = parse(data)

    holder = task.dispatches[0] if where == "dispatch" else task
    assert getattr(holder, key) in ("", ())


def test_a_file_without_a_slug_takes_the_folder_name() -> None:
    data = {key: value for key, value in EARLIER_VERSION.items() if key != "slug"}

    assert parse(data).slug == "do-it"


def test_progress_is_written_message_percent_at_and_no_feedback_as_an_empty_list() -> None:
    record = make_record("a1", progress=Progress("half", "2026-01-01T10:01:00Z", 50))
    task = Task(slug="do-it", created="2026-01-01T10:00:00Z", dispatches=(record,))

    [written] = json.loads(dump_task(task))["dispatches"]

    assert written["progress"] == {"message": "half", "percent": 50.0, "at": "2026-01-01T10:01:00Z"}
    assert list(written["progress"]) == ["message", "percent", "at"]
    assert written["feedback"] == []


def test_unknown_keys_are_ignored_so_newer_files_load() -> None:
    data = json.loads(json.dumps(EARLIER_VERSION))
    data["labels"] = ["x"]
    data["dispatches"][0]["worker"] = "host-2"

    assert parse(data).dispatches[0].agent_id == "a1"


def test_the_folder_name_is_the_slug_whatever_the_file_says() -> None:
    assert parse({**EARLIER_VERSION, "slug": "copied-from-elsewhere"}).slug == "do-it"


def test_writing_then_reading_gives_back_the_same_task() -> None:
    task = Task(
        slug="do-it",
        created="2026-01-01T10:00:00.000001Z",
        description="Dö it ✓",
        thread=ThreadRef("C1", "1.2"),
        dispatches=(
            make_record(
                "a1",
                result=AgentResult("s", ("c",), ("i",), ("q",)),
                progress=Progress("half", "2026-01-01T10:01:00Z", 50),
                cost_usd=1,
            ),
        ),
        decisions=(Decision("t", "b", "2026-01-01T10:02:00Z", "a1", "pm"),),
    )

    data = dump_task(task)

    assert "Dö it ✓" in data.decode("utf-8")
    assert data.endswith(b"}\n")
    assert parse_task(data, file=FILE, slug="do-it") == task


def test_a_simulated_cost_is_marked_as_such_in_the_file() -> None:
    simulated = make_record("a1", cost_usd=0.5, cost_simulated=True)
    paid = make_record("a2", cost_usd=0.5)
    task = Task(slug="do-it", created="2026-01-01T10:00:00Z", description="x",
                dispatches=(simulated, paid))  # fmt: skip

    data = dump_task(task)
    stored = json.loads(data)["dispatches"]

    assert (stored[0]["costSimulated"], stored[1]["costSimulated"]) == (True, False)
    assert parse_task(data, file=FILE, slug="do-it").dispatches == (simulated, paid)


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (
            lambda d: d["dispatches"][0].update(turns="four"),
            "dispatches[0].turns: expected an integer",
        ),
        (lambda d: d["dispatches"][0].pop("status"), "dispatches[0].status: missing"),
        (
            lambda d: d["dispatches"][0].update(status="done"),
            "dispatches[0].status: 'done' is not one of",
        ),
        (lambda d: d["dispatches"][0]["result"].update(changes=[1]), "result.changes[0]"),
        (lambda d: d.update(thread={"channel": "C1"}), "thread.threadTs: missing"),
        (lambda d: d.update(created=20250601), "created: expected a string"),
        (lambda d: d.update(dispatches={"a1": {}}), "dispatches: expected a list"),
        (
            lambda d: d["dispatches"][0].update(progress=50),
            "dispatches[0].progress: expected a mapping",
        ),
        (
            lambda d: d["dispatches"][0].update(costUsd="0.5"),
            "dispatches[0].costUsd: expected a number",
        ),
    ],
    ids=[
        "wrong-type",
        "missing",
        "bad-status",
        "bad-item",
        "half-thread",
        "number",
        "not-list",
        "not-object",
        "string-number",
    ],
)
def test_a_bad_field_is_named_by_its_path_with_what_was_found(change: Any, expected: str) -> None:
    data = json.loads(json.dumps(EARLIER_VERSION))
    change(data)

    error = problem(data)

    assert expected in error.message
    assert error.message.startswith(f"{FILE}: corrupt task file: ")


def test_the_error_shows_the_value_found_and_the_fix_names_the_field() -> None:
    data = json.loads(json.dumps(EARLIER_VERSION))
    data["dispatches"][0]["status"] = "done"

    error = problem(data)

    assert "'done' is not one of" in error.message
    assert "queued, running" in error.message  # the allowed values
    assert "dispatches[0].status" in error.fix
    assert "version control" in error.fix


def test_a_file_that_is_not_an_object_or_not_json_is_named_as_a_whole() -> None:
    assert "(top level): expected a mapping, found a list" in problem([]).message
    with pytest.raises(HarnessError, match=r"\(top level\): not valid JSON \(key must be"):
        parse_task(b"{not json", file=FILE, slug="do-it")


def test_a_relative_file_is_named_by_its_absolute_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)

    with pytest.raises(HarnessError) as caught:
        parse([], file=Path("do-it/task.json"))

    assert caught.value.message.startswith(f"{tmp_path / 'do-it' / 'task.json'}: ")
