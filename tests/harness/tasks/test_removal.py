"""Which tasks rm and prune-tasks may delete, and what they say: pure, over literals."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta
from pathlib import Path

from harness.tasks.model import Decision, DispatchRecord, Task
from harness.tasks.removal import (
    Kept,
    busy_error,
    last_activity,
    plan_prune,
    render_plan,
    render_removed,
)
from harness.testing.records import make_record

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
DAYS_30 = timedelta(days=30)


def task(
    slug: str, created: str, *records: DispatchRecord, decisions: tuple[Decision, ...] = ()
) -> Task:
    return Task(slug, created, f"about {slug}", dispatches=records, decisions=decisions)


def test_last_activity_is_the_latest_of_creation_agents_and_decisions() -> None:
    done = make_record(
        "a1", status="completed", started_at="2026-01-05T10:00:00Z",
        completed_at="2026-01-06T10:00:00Z",
    )  # fmt: skip
    decided = Decision("Use SQLite", "embedded", "2026-01-07T08:00:00+00:00")

    assert last_activity(task("t", "2026-01-01T00:00:00Z")) == datetime(2026, 1, 1, tzinfo=UTC)
    assert last_activity(task("t", "2026-01-01T00:00:00Z", done)) == datetime(
        2026, 1, 6, 10, tzinfo=UTC
    )
    assert last_activity(task("t", "2026-01-01T00:00:00Z", done, decisions=(decided,))) == (
        datetime(2026, 1, 7, 8, tzinfo=UTC)
    )
    assert last_activity(task("t", "yesterday")) is None


def test_prune_deletes_the_tasks_idle_longer_than_the_retention_only() -> None:
    old = task("old", "2026-01-01T00:00:00Z", make_record("a1", status="failed"))
    recent = task("recent", "2026-02-20T00:00:00Z")
    revived = task(
        "revived", "2025-06-01T00:00:00Z",
        make_record("a2", status="completed", started_at="2026-02-27T00:00:00Z"),
    )  # fmt: skip

    plan = plan_prune([recent, revived, old], now=NOW, older_than=DAYS_30)

    assert [t.slug for t in plan.delete] == ["old"]
    assert plan.kept == ()


def test_prune_keeps_an_old_task_an_agent_works_on_and_one_with_unreadable_dates() -> None:
    busy = task(
        "busy", "2025-01-01T00:00:00Z",
        make_record("a1", status="running", started_at="2025-01-01T00:00:00Z"),
    )  # fmt: skip
    mangled = task("mangled", "a while ago")

    plan = plan_prune([busy, mangled], now=NOW, older_than=DAYS_30)

    assert plan.delete == ()
    assert plan.kept == (
        Kept("busy", "an agent is running on it"),
        Kept("mangled", "its dates cannot be read"),
    )


def test_the_prune_plan_lists_each_task_with_its_idle_days_and_what_is_kept() -> None:
    old = task("old", "2026-01-01T12:00:00Z")
    plan = dataclasses.replace(
        plan_prune([old], now=NOW, older_than=DAYS_30), kept=(Kept("busy", "an agent is busy"),)
    )

    assert render_plan(plan, now=NOW).splitlines() == [
        "Tasks idle for more than 30 days (1):",
        "  old  idle 59 d  about old",
        "  kept busy: an agent is busy",
    ]
    empty = plan_prune([], now=NOW, older_than=timedelta(days=1))
    assert render_plan(empty, now=NOW) == "No task has been idle for more than 1 day."


def test_a_busy_task_is_refused_with_its_agents_and_the_ways_out() -> None:
    error = busy_error("t", [make_record("a1", status="running")])

    assert error.message == "task 't' has agents at work: developer a1 (running)"
    assert "--force" in error.fix


def test_rm_says_what_it_deleted_and_that_the_workspace_and_branch_stay() -> None:
    record = make_record("a1", status="completed", branch="harness/t")
    workspace = Path("/w/t")

    text = render_removed("t", task("t", "2026-01-01T00:00:00Z", record), workspace=workspace)

    assert text.splitlines()[0] == (
        "Deleted task t and its 1 dispatch(es): task.json, journals, diffs and audit log."
    )
    assert "Not deleted: its workspace /w/t (branch harness/t)." in text
    assert "harness workspaces prune" in text


def test_rm_of_a_task_without_a_workspace_says_nothing_of_one() -> None:
    text = render_removed("t", task("t", "2026-01-01T00:00:00Z"), workspace=None)

    assert text == "Deleted task t: task.json, journals, diffs and audit log."
    branch_only = task("t", "x", make_record("a1", status="completed", branch="harness/t"))
    assert "Not deleted: its branch harness/t" in render_removed("t", branch_only, workspace=None)
