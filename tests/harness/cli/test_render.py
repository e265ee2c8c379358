"""Terminal rendering: pure functions over literal records."""

from __future__ import annotations

import dataclasses
import json

from harness.cli.render import (
    render_audit_json,
    render_prune,
    render_pull_request,
    render_pull_request_json,
    render_record,
    render_task,
    render_task_list,
    render_task_list_json,
)
from harness.tasks.model import AgentResult, DispatchRecord, PullRequest, Task, TaskSummary
from harness.testing.records import make_record
from harness.workspaces.prune import Kept, PruneReport, Removed

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
    assert "Pull request" not in text


PULL = PullRequest(
    repository="acme/web",
    number=7,
    url="https://github.com/acme/web/pull/7",
    branch="harness/add-a-page",
    base="main",
    opened_by="harness-bot",
    requested_by="U1",
    head_commit="0123456789abcdef",
    checks="failed",
    failing=("lint", "tests"),
)


def test_show_names_the_tasks_pull_request_its_branch_opener_and_checks() -> None:
    task = Task("add-a-page", "2026-01-01T00:00:00Z", "add a page", pull_request=PULL)

    assert (
        "Pull request: #7 https://github.com/acme/web/pull/7 (harness/add-a-page into main, "
        "opened as harness-bot, checks failed (lint, tests))"
    ) in render_task(task, "context").splitlines()


def test_pr_prints_the_number_url_branch_and_who_opened_it() -> None:
    assert render_pull_request(PULL).splitlines() == [
        "Pull request #7: https://github.com/acme/web/pull/7",
        "Branch: harness/add-a-page at 0123456789ab, into main of acme/web",
        "Opened as: harness-bot for U1",
    ]
    document = json.loads(render_pull_request_json("add-a-page", PULL))
    assert document["task"] == "add-a-page"
    assert document["pullRequest"]["number"] == 7
    assert document["pullRequest"]["openedBy"] == "harness-bot"


def test_the_task_list_shows_each_tasks_status_cost_and_pull_request_in_columns() -> None:
    tasks = [
        TaskSummary(
            "add-a-page",
            "2026-01-02T10:00:00.123Z",
            "add a page",
            3,
            status="running",
            cost_usd=0.12345,
            pull_request="https://github.com/acme/web/pull/12",
        ),
        TaskSummary("fix-it", "2026-01-01T09:00:00Z", "fix   it\n now", 0),
    ]

    assert render_task_list(tasks).splitlines() == [
        "SLUG        CREATED              STATUS      COST  DISPATCHES  PR   DESCRIPTION",
        "add-a-page  2026-01-02 10:00:00  running  $0.1235           3  #12  add a page",
        "fix-it      2026-01-01 09:00:00  new            —           0  —    fix it now",
    ]


def test_an_empty_task_list_says_how_to_start_a_task() -> None:
    assert render_task_list([]) == 'No tasks yet. Start one with: harness run "your request"'


def test_a_cost_from_the_scripted_model_is_marked_simulated() -> None:
    paid = make_record("a1", status="completed", cost_usd=0.0123, turns=2, duration_ms=700)
    simulated = dataclasses.replace(paid, cost_simulated=True)
    task = TaskSummary("paint", "2026-11-22T10:00:00Z", "Paint", 1, cost_usd=0.0123,
                       cost_simulated=True)  # fmt: skip

    assert "$0.0123 (simulated)" in render_record(simulated)
    assert "(simulated)" not in render_record(paid)
    assert "$0.0123 (simulated)" in render_task_list([task])


def test_the_json_task_list_holds_each_summary_in_its_task_json_form() -> None:
    summary = TaskSummary("t1", "2026-01-01T00:00:00Z", "plan it", 2, last_role="developer")

    document = json.loads(render_task_list_json([summary]))

    assert document["damaged"] == []
    (task,) = document["tasks"]
    assert (task["slug"], task["dispatchCount"], task["lastRole"]) == ("t1", 2, "developer")


def test_the_json_audit_log_keeps_the_entries_as_stored() -> None:
    entry = {"tool": "show_agent", "ok": True}

    assert json.loads(render_audit_json("t1", [entry])) == {"task": "t1", "entries": [entry]}


def test_a_dry_run_prune_lists_every_workspace_and_why() -> None:
    report = PruneReport(
        removed=(Removed("old", None, would_save=True), Removed("empty", None)),
        kept=(Kept("busy", "in use", "the task is active"),),
        patches=(),
        dry_run=True,
    )

    assert render_prune(report).splitlines() == [
        "Would remove 2 workspace(s), keep 1 (dry run: nothing was changed).",
        "  would remove old: idle; its uncommitted work would be saved to a patch",
        "  would remove empty: idle",
        "  would keep busy: in use (the task is active)",
    ]
