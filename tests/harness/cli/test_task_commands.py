"""Deleting and listing tasks from the terminal: ``rm``, ``--json`` listings, ``workspaces
prune`` and ``prune-tasks``."""

from __future__ import annotations

import json
import os
import pty
from pathlib import Path

import pytest

from harness.testing.records import make_record
from tests.harness.cli import cli_support
from tests.harness.cli.cli_support import age_tree, bare, stored_task, task_folders

model = cli_support.model

pytestmark = pytest.mark.subprocess


# ------------------------------------------------------------------ deleting tasks


def test_rm_yes_deletes_the_task_and_says_the_workspace_stays(project_dir: Path) -> None:
    slug = stored_task(project_dir, make_record("a1", status="completed"))
    workspace = project_dir / ".agents" / "workspaces" / slug
    workspace.mkdir(parents=True)

    result = bare(project_dir, "rm", slug, "--yes")

    assert result.returncode == 0, result.stderr
    assert f"Deleted task {slug} and its 1 dispatch(es)" in result.stdout
    assert f"Not deleted: its workspace {workspace}" in result.stdout
    assert task_folders(project_dir) == []
    assert workspace.is_dir()
    assert bare(project_dir, "tasks").stdout.startswith("No tasks yet.")


def test_json_listings_print_one_document_on_stdout(project_dir: Path) -> None:
    slug = stored_task(project_dir, make_record("a1", status="completed"))
    workspace = project_dir / ".agents" / "workspaces" / slug
    workspace.mkdir(parents=True)
    (workspace / "notes.md").write_text("draft", encoding="utf-8")

    tasks = bare(project_dir, "tasks", "--json")
    show = bare(project_dir, "show", slug, "--json")
    audit = bare(project_dir, "audit", slug, "--json")
    listed = bare(project_dir, "workspaces", "list", "--json")

    for result in (tasks, show, audit, listed):
        assert result.returncode == 0, result.stderr
    # json.loads reads the whole of stdout: one document and nothing else.
    summaries = json.loads(tasks.stdout)
    assert [t["slug"] for t in summaries["tasks"]] == [slug]
    assert summaries["tasks"][0]["dispatchCount"] == 1
    assert summaries["damaged"] == []
    shown = json.loads(show.stdout)
    assert shown["task"]["slug"] == slug
    assert [d["agentId"] for d in shown["task"]["dispatches"]] == ["a1"]
    assert isinstance(shown["context"], str)
    assert json.loads(audit.stdout) == {"task": slug, "entries": []}
    (info,) = json.loads(listed.stdout)["workspaces"]
    assert (info["slug"], info["path"], info["kind"]) == (slug, str(workspace), "scratch")
    assert info["uncommitted"] is True


def test_json_lists_a_damaged_task_with_its_repair(project_dir: Path) -> None:
    slug = stored_task(project_dir)
    (project_dir / ".agents" / "tasks" / slug / "task.json").write_text("{", "utf-8")

    result = bare(project_dir, "tasks", "--json")

    assert result.returncode == 0, result.stderr
    (damaged,) = json.loads(result.stdout)["damaged"]
    assert (damaged["slug"], damaged["repair"]) == (slug, f"harness repair {slug}")


def test_json_is_refused_for_workspaces_prune(project_dir: Path) -> None:
    result = bare(project_dir, "workspaces", "prune", "--json")

    assert result.returncode == 2
    assert result.stdout == ""
    assert "--json is for `harness workspaces list`" in result.stderr


def test_workspaces_prune_dry_run_lists_what_it_would_do_and_changes_nothing(
    project_dir: Path,
) -> None:
    root = project_dir / ".agents" / "workspaces"
    old_work, old_empty, fresh = (root / name for name in ("old-work", "old-empty", "fresh"))
    for folder in (old_work, old_empty, fresh):
        folder.mkdir(parents=True)
    (old_work / "notes.md").write_text("draft", encoding="utf-8")
    age_tree(old_work, 30)
    age_tree(old_empty, 30)
    before = sorted(str(p) for p in root.rglob("*"))

    result = bare(project_dir, "workspaces", "prune", "--dry-run", "--days", "7")

    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == "Would remove 2 workspace(s), keep 1 (dry run: nothing was changed)."
    assert "  would remove old-empty: idle" in lines
    assert "  would remove old-work: idle; its uncommitted work would be saved to a patch" in lines
    assert any(line.startswith("  would keep fresh: recent (modified after ") for line in lines)
    assert sorted(str(p) for p in root.rglob("*")) == before  # no patch, nothing removed

    pruned = bare(project_dir, "workspaces", "prune", "--days", "7")
    assert pruned.stdout.startswith("Removed 2 workspace(s), kept 1.")
    assert not old_work.exists()
    assert fresh.is_dir()


def test_rm_without_a_terminal_or_yes_deletes_nothing(project_dir: Path) -> None:
    slug = stored_task(project_dir)

    result = bare(project_dir, "rm", slug)

    assert result.returncode == 2
    assert "pass --yes" in result.stderr
    assert [p.name for p in task_folders(project_dir)] == [slug]


@pytest.mark.parametrize(("answer", "deleted"), [(b"y\n", True), (b"n\n", False)])
def test_rm_asks_on_the_terminal_first(project_dir: Path, answer: bytes, deleted: bool) -> None:
    slug = stored_task(project_dir, make_record("a1", status="failed", cost_usd=0.5))
    terminal, replica = pty.openpty()
    try:
        os.write(terminal, answer)  # typed ahead: the terminal keeps it until read
        result = bare(project_dir, "rm", slug, stdin=replica)
    finally:
        os.close(replica)
        os.close(terminal)

    question = f'Delete task {slug} ("an earlier request", 1 dispatch(es), failed, $0.5000)'
    assert question in result.stderr
    assert result.returncode == (0 if deleted else 1), result.stderr
    assert (task_folders(project_dir) == []) is deleted


def test_rm_refuses_a_task_an_agent_runs_on_unless_forced(project_dir: Path) -> None:
    # A dispatch of a live harness process (this one) that is still running.
    running = make_record("a1", status="running", host_pid=os.getpid())
    slug = stored_task(project_dir, running)

    refused = bare(project_dir, "rm", slug, "--yes")
    assert refused.returncode == 2
    assert f"task {slug!r} has agents at work: developer a1 (running)" in refused.stderr
    assert len(task_folders(project_dir)) == 1

    forced = bare(project_dir, "rm", slug, "--yes", "--force")
    assert forced.returncode == 0, forced.stderr
    assert task_folders(project_dir) == []


def test_prune_tasks_deletes_the_idle_tasks_and_keeps_recent_ones(project_dir: Path) -> None:
    old = stored_task(project_dir, created="2020-01-01T00:00:00Z")
    recent = stored_task(project_dir)

    unset = bare(project_dir, "prune-tasks", "--yes")
    assert unset.returncode == 2
    assert "pruneTasksAfterDays" in unset.stderr

    config = project_dir / "config.yaml"
    config.write_text(
        config.read_text("utf-8").replace("pruneTasksAfterDays: null", "pruneTasksAfterDays: 30"),
        "utf-8",
    )
    dry = bare(project_dir, "prune-tasks", "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert dry.stdout.splitlines()[0] == "Tasks idle for more than 30 days (1):"
    assert len(task_folders(project_dir)) == 2

    pruned = bare(project_dir, "prune-tasks", "--yes")
    assert pruned.returncode == 0, pruned.stderr
    assert f"  {old}  idle " in pruned.stdout
    assert "Deleted 1 task(s)." in pruned.stdout
    assert [p.name for p in task_folders(project_dir)] == [recent]
