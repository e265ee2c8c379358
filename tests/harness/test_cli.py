"""The ``harness`` command as a user runs it: a subprocess against the scripted model."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.testing.processes import claude_children
from harness.testing.scripted_model import ModelRequest, ScriptedModel, Turn, demo_script


def task_folders(project_dir: Path) -> list[Path]:
    """The tasks' folders (the store's own files start with a dot)."""
    tasks = project_dir / ".agents" / "tasks"
    return [p for p in tasks.iterdir() if not p.name.startswith(".")] if tasks.exists() else []


def script(request: ModelRequest) -> Turn:
    if "slow" in request.first_user_text:
        return Turn(stall_seconds=60)
    if "ask me" in request.first_user_text:
        if not request.tool_results:
            return Turn.call("mcp__harness__ask_human", question="Which database?")
        return Turn.finish("asked", issues=[request.tool_results[-1].text])
    if "an audit log" in request.first_user_text:
        return demo_script(request)  # the analyst drafts and awaits a developer
    if "## Task History" in request.first_user_text:
        return Turn.finish("Reviewed the plan", ["checked the steps"])
    return Turn.finish("Settings page planned", ["plan.md"], ["no design yet"], ["Which fields?"])


@pytest.fixture(scope="module")
def model() -> Iterator[ScriptedModel]:
    with ScriptedModel.in_thread(script) as served:
        yield served


def harness(
    project_dir: Path, model: ScriptedModel, *args: str
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "harness", *args, "--config", str(project_dir / "config.yaml")],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, **model.env()},
        check=False,
    )


@pytest.mark.slow
def test_run_then_follow_up_with_task_then_list_and_show(
    project_dir: Path, model: ScriptedModel
) -> None:
    first = harness(project_dir, model, "run", "plan a settings page")
    assert first.returncode == 0, first.stderr
    assert "product-analyst completed" in first.stdout
    assert "Summary: Settings page planned" in first.stdout
    assert "  1. Which fields?" in first.stdout
    slug = first.stdout.split("Task: ")[1].split()[0]

    # The analyst asked a question, so an unnamed follow-up would answer it: name the role.
    follow_up = harness(
        project_dir, model, "run", "--task", slug, "--role", "reviewer", "review the plan"
    )
    assert follow_up.returncode == 0, follow_up.stderr
    assert "reviewer completed" in follow_up.stdout
    assert "Summary: Reviewed the plan" in follow_up.stdout
    prompt = model.main_requests[-1].first_user_text
    assert "Settings page planned" in prompt
    assert "Which fields?" in prompt

    listing = harness(project_dir, model, "tasks")
    assert listing.returncode == 0
    row = next(line for line in listing.stdout.splitlines() if line.startswith(slug))
    assert row.split()[3] == "2"  # slug, date, time, dispatch count
    assert "plan a settings page" in row

    shown = harness(project_dir, model, "show", slug)
    assert shown.returncode == 0
    assert "## Task History" in shown.stdout
    assert "product-analyst completed" in shown.stdout
    assert "reviewer completed" in shown.stdout


@pytest.mark.slow
def test_a_plan_goes_to_the_analyst_which_drafts_and_awaits_a_developer(
    project_dir: Path, model: ScriptedModel
) -> None:
    run = harness(project_dir, model, "run", "plan: an audit log")
    assert run.returncode == 0, run.stderr
    assert run.stdout.startswith("product-analyst completed")
    assert "drafted developer" in run.stdout
    assert "developer started" in run.stderr  # progress lines for the drafted agent too
    slug = run.stdout.split("Task: ")[1].split()[0]

    audit = harness(project_dir, model, "audit", slug)
    tools = [line.split()[3:5] for line in audit.stdout.splitlines()]
    assert tools == [["draft_agent", "ok"], ["await_agent", "ok"]]

    shown = harness(project_dir, model, "show", slug)
    assert "Harness tool calls: await_agent 1, draft_agent 1" in shown.stdout
    assert "developer completed" in shown.stdout
    assert "drafted by" in shown.stdout


@pytest.mark.slow
def test_follow_up_without_role_keeps_the_tasks_last_role(
    project_dir: Path, model: ScriptedModel
) -> None:
    first = harness(project_dir, model, "run", "review the login code")
    slug = first.stdout.split("Task: ")[1].split()[0]
    again = harness(project_dir, model, "run", "--task", slug, "and the logout code too")
    assert again.returncode == 0, again.stderr
    assert again.stdout.startswith("reviewer completed")


def test_unknown_role_exits_2_and_lists_the_roles(project_dir: Path, model: ScriptedModel) -> None:
    result = harness(project_dir, model, "run", "--role", "wizard", "do magic")
    assert result.returncode == 2
    assert "unknown role 'wizard'" in result.stderr
    assert "developer, product-analyst, reviewer" in result.stderr
    assert task_folders(project_dir) == []


def test_unknown_task_exits_2_and_suggests_harness_tasks(
    project_dir: Path, model: ScriptedModel
) -> None:
    result = harness(project_dir, model, "run", "--task", "no-such-task", "go on")
    assert result.returncode == 2
    assert "no task 'no-such-task'" in result.stderr
    assert "harness tasks" in result.stderr
    shown = harness(project_dir, model, "show", "../../etc")
    assert shown.returncode == 2
    assert "invalid task slug" in shown.stderr


def test_a_broken_config_names_the_file_the_field_and_the_fix(
    project_dir: Path, model: ScriptedModel
) -> None:
    config = project_dir / "config.yaml"
    config.write_text("routing:\n  - pattern: '^(plan'\n    role: product-analyst\n", "utf-8")
    result = harness(project_dir, model, "tasks")
    assert result.returncode == 2
    assert str(config) in result.stderr
    assert "routing[0].pattern" in result.stderr
    assert "^(plan" in result.stderr
    assert "fix:" in result.stderr


def test_a_rule_naming_an_unknown_role_lists_the_roles(
    project_dir: Path, model: ScriptedModel
) -> None:
    (project_dir / "config.yaml").write_text(
        "routing:\n  - pattern: '^x'\n    role: architect\n", "utf-8"
    )
    result = harness(project_dir, model, "tasks")
    assert result.returncode == 2
    assert "architect" in result.stderr
    assert "developer, product-analyst, reviewer" in result.stderr


def test_a_broken_role_file_names_the_file_the_field_and_the_fix(
    project_dir: Path, model: ScriptedModel
) -> None:
    role = project_dir / "roles" / "reviewer.md"
    role.write_text(role.read_text("utf-8").replace("category: worker", "category: 7"), "utf-8")
    result = harness(project_dir, model, "tasks")
    assert result.returncode == 2
    assert "reviewer.md" in result.stderr
    assert "category" in result.stderr
    assert "fix:" in result.stderr


@pytest.mark.slow
def test_ask_human_without_a_terminal_fails_at_once_with_a_clear_error(
    project_dir: Path, model: ScriptedModel
) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "harness", "run", "--role", "developer", "ask me something"],
        cwd=project_dir,
        env={**os.environ, **model.env()},
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,  # the default ask timeout is 900 s: returning at all proves it did not wait
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert "NO_HUMAN_AVAILABLE" in result.stdout
    assert "no human can be reached" in result.stdout


def test_help_is_there_for_every_command(project_dir: Path, model: ScriptedModel) -> None:
    for command in ("run", "tasks", "show", "audit", "bot"):
        result = harness(project_dir, model, command, "--help")
        assert result.returncode == 0
        assert "--config" in result.stdout


def test_log_file_takes_the_log_and_v_adds_the_harness_debug_lines(
    project_dir: Path, model: ScriptedModel, tmp_path: Path
) -> None:
    quiet, verbose = tmp_path / "quiet.log", tmp_path / "verbose.log"
    plain = harness(project_dir, model, "tasks", "--log-file", str(quiet))
    assert plain.returncode == 0, plain.stderr
    assert quiet.read_text("utf-8") == ""  # a one-shot command logs warnings only

    # Given before or after the command, the options count.
    detailed = harness(project_dir, model, "--log-file", str(verbose), "tasks", "-v")
    assert detailed.returncode == 0, detailed.stderr
    lines = verbose.read_text("utf-8").splitlines()
    assert any(" DEBUG harness." in line for line in lines)
    # Debug lines of the harness's own loggers only: no library's.
    assert [x for x in lines if re.search(r" DEBUG (?!(harness|bot)\.)", x)] == []
    assert detailed.stderr == ""  # the log went to the file, not to standard error


@pytest.mark.slow
def test_sigterm_interrupts_the_run_and_leaves_no_claude_process(
    project_dir: Path, model: ScriptedModel
) -> None:
    before = len(model.requests)
    proc = subprocess.Popen(
        [sys.executable, "-m", "harness", "run", "a slow job"],
        cwd=project_dir,
        env={**os.environ, **model.env()},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        model.wait_for_request_sync(after=before, timeout=30)
        children = claude_children(proc.pid)
        assert children
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=15)
    finally:
        proc.kill()
    assert proc.returncode == 130, err
    assert "developer interrupted" in out
    assert all(not Path(f"/proc/{pid}").exists() for pid in children)
    [task_dir] = task_folders(project_dir)
    stored = json.loads((task_dir / "task.json").read_text("utf-8"))
    assert stored["dispatches"][0]["status"] == "interrupted"
