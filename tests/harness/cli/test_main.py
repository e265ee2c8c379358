"""The ``harness`` command as a user runs it: a subprocess against the scripted model: runs,
follow-ups and plans, what a wrong role, task, config or role file says, help, logs, a
SIGTERM, and an approval typed on the terminal."""

from __future__ import annotations

import asyncio
import json
import os
import pty
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from harness.tasks.store import FileTaskStore
from harness.testing import spawn
from harness.testing.processes import claude_children
from harness.testing.scripted_model import ScriptedModel
from tests.harness.cli import cli_support
from tests.harness.cli.cli_support import harness, task_folders

model = cli_support.model

pytestmark = pytest.mark.subprocess


@pytest.mark.slow
def test_run_then_follow_ups_with_and_without_a_role_then_list_and_show(
    project_dir: Path, model: ScriptedModel
) -> None:
    first = harness(project_dir, model, "run", "-v", "plan a settings page")
    assert first.returncode == 0, first.stderr
    assert "product-analyst completed" in first.stdout
    # Its agent's CLI was started while the task was made.
    assert "starts on a spare, started ahead" in first.stderr
    # Not primed (no first turn run ahead, its model calls held): its prompt is on the way,
    # and a priming turn would only come before it.
    assert "primes this CLI" not in first.stderr
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
    status, cost, dispatches = row.split()[3:6]  # after the slug, date and time
    assert (status, dispatches) == ("completed", "2")
    assert cost.startswith("$")  # what the agents reported
    assert "plan a settings page" in row

    shown = harness(project_dir, model, "show", slug)
    assert shown.returncode == 0
    assert "## Task History" in shown.stdout
    assert "product-analyst completed" in shown.stdout
    assert "reviewer completed" in shown.stdout

    # A follow-up without a role keeps the task's last role (the reviewer, not the analyst).
    again = harness(project_dir, model, "run", "--task", slug, "and the logout code too")
    assert again.returncode == 0, again.stderr
    assert again.stdout.startswith("reviewer completed")


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


def test_unknown_role_exits_2_and_lists_the_roles(project_dir: Path, model: ScriptedModel) -> None:
    result = harness(project_dir, model, "run", "--role", "wizard", "do magic")
    assert result.returncode == 2
    assert "unknown role 'wizard'" in result.stderr
    assert "developer, product-analyst, reviewer" in result.stderr
    assert task_folders(project_dir) == []


def test_an_unknown_role_is_said_first_even_with_no_way_to_reach_a_model(
    project_dir: Path, tmp_path: Path
) -> None:
    """The role is known from config.yaml alone: its mistake is named before the harness
    opens (no model check, no SDK import), whatever else is missing."""
    dropped = ("ANTHROPIC_", "CLAUDE_CODE_", "CLAUDE_CONFIG_DIR")
    env = {k: v for k, v in os.environ.items() if not k.startswith(dropped)}
    result = spawn.run(
        [sys.executable, "-m", "harness", "run", "--role", "wizard", "do magic",
         "--config", str(project_dir / "config.yaml")],
        capture_output=True, text=True, timeout=60, env={**env, "HOME": str(tmp_path)},
        check=False,
    )  # fmt: skip
    assert result.returncode == 2
    assert "unknown role 'wizard'" in result.stderr, result.stderr
    assert "reach a model" not in result.stderr
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
    result = spawn.run(
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
    proc = spawn.Popen(
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


@pytest.mark.slow
def test_an_approval_typed_on_the_terminal_for_someone_elses_task_is_refused(
    project_dir: Path, model: ScriptedModel
) -> None:
    config = project_dir / "config.yaml"
    text = config.read_text(encoding="utf-8")
    config.write_text(
        text.replace("askHuman:\n  timeoutSeconds: 900", "askHuman:\n  timeoutSeconds: 3"),
        encoding="utf-8",
    )

    async def slack_task() -> str:
        store = FileTaskStore(project_dir / ".agents" / "tasks")
        try:
            return (await store.create("fix the login", requester="U1")).slug
        finally:
            await store.close()

    slug = asyncio.run(slack_task())
    terminal, replica = pty.openpty()
    try:
        os.write(terminal, b"allow\n")  # typed ahead: read once the approval is asked
        result = spawn.run(
            [sys.executable, "-m", "harness", "run", "--task", slug, "push the work"],
            cwd=project_dir,
            stdin=replica,
            capture_output=True,
            text=True,
            timeout=60,
            env={**os.environ, **model.env()},
            check=False,
        )
    finally:
        os.close(replica)
        os.close(terminal)

    assert "asks to run Bash: `git push -h`" in result.stderr
    assert (
        "may not approve what this task's agents run: only the person who asked for it (U1) "
        "and the admins may"
    ) in result.stderr
    assert "denied: nobody approved it in time" in result.stdout
    task = json.loads((project_dir / ".agents" / "tasks" / slug / "task.json").read_text())
    assert task["requester"] == "U1"
    audit = (project_dir / ".agents" / "tasks" / slug / "audit.jsonl").read_text()
    [decision] = [json.loads(line) for line in audit.splitlines() if '"approval"' in line]
    assert (decision["outcome"], decision["decidedBy"]) == ("denied", "timeout")
