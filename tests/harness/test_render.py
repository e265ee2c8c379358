"""Terminal rendering: pure functions over literal records."""

from __future__ import annotations

import dataclasses

from harness.render import render_record, render_task
from harness.results import AgentResult, DispatchRecord, Task

RECORD = DispatchRecord(
    agent_id="a1b2c3d4e5",
    role="developer",
    cwd="/w",
    model=None,
    started_at="2026-01-01T00:00:00Z",
    status="completed",
    journal_file="journals/a1b2c3d4e5.jsonl",
    duration_ms=2_000,
    result=AgentResult(summary="Changed the page"),
    branch="harness/add-a-page",
    head_commit="0123456789abcdef",
    diff_stat=" page.py | 4 ++--\n 1 file changed, 2 insertions(+), 2 deletions(-)",
    diff_file="diffs/a1b2c3d4e5.diff",
)


def test_a_record_of_work_in_a_git_workspace_names_the_branch_head_and_diff_stat() -> None:
    text = render_record(RECORD, task_slug="add-a-page")
    assert "Branch: harness/add-a-page at 0123456789ab" in text
    assert "  page.py | 4 ++--" in text
    assert "  1 file changed, 2 insertions(+), 2 deletions(-)" in text


def test_a_record_without_a_workspace_says_nothing_of_branches() -> None:
    plain = dataclasses.replace(RECORD, branch=None, head_commit=None, diff_stat=None)
    assert "Branch" not in render_record(plain)


def test_show_names_the_tasks_workspace_branch_and_repository_and_each_kept_diff() -> None:
    task = Task(
        "add-a-page", "2026-01-01T00:00:00Z", "add a page", dispatches=(RECORD,), repository="web"
    )
    text = render_task(task, "context")
    assert "Workspace: /w on branch harness/add-a-page (repository web)" in text
    assert "Diff: diffs/a1b2c3d4e5.diff" in text
