"""The ``harness`` command as a user runs it: a subprocess against the scripted model."""

from __future__ import annotations

import asyncio
import json
import os
import pty
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.tasks.model import DispatchRecord
from harness.tasks.store import FileTaskStore
from harness.testing.processes import claude_children
from harness.testing.records import make_record
from harness.testing.scripted_model import ModelRequest, ScriptedModel, Turn, demo_script

pytestmark = pytest.mark.subprocess


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
    if "push the work" in request.first_user_text:  # needs an approval
        if not request.all_tool_results:
            return Turn.call("Bash", command="git push -h")
        return Turn.finish("checked", issues=[request.all_tool_results[-1].text])
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
    result = subprocess.run(
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


# ------------------------------------------------------------------ a newcomer's first commands


def offline_env(home: Path) -> dict[str, str]:
    """This environment without any way to reach a model (keys, gateways, a login)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "CLAUDE_"))}
    return {**env, "HOME": str(home)}


def bare(
    cwd: Path, *args: str, env: dict[str, str] | None = None, stdin: int = subprocess.DEVNULL
) -> subprocess.CompletedProcess[str]:
    """``harness ARGS`` run in ``cwd``, its config found the default way, with no access to
    a model unless ``env`` gives one."""
    return subprocess.run(
        [sys.executable, "-m", "harness", *args],
        cwd=cwd,
        stdin=stdin,
        capture_output=True,
        text=True,
        timeout=60,
        env=env if env is not None else offline_env(cwd),
        check=False,
    )


def stored_task(project_dir: Path, *records: DispatchRecord, created: str | None = None) -> str:
    """A task written by the store itself, as an earlier run would have; its slug."""

    async def create() -> str:
        store = FileTaskStore(project_dir / ".agents" / "tasks")
        try:
            slug = (await store.create("an earlier request")).slug
            for record in records:
                await store.save_dispatch(slug, record)
            return slug
        finally:
            await store.close()

    slug = asyncio.run(create())
    if created is not None:  # as if made long ago: a hand edit the store re-reads
        file = project_dir / ".agents" / "tasks" / slug / "task.json"
        data = json.loads(file.read_text("utf-8"))
        data["created"] = created
        file.write_text(json.dumps(data), "utf-8")
    return slug


def test_bare_harness_prints_the_help_and_exits_0(tmp_path: Path) -> None:
    result = bare(tmp_path)

    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("usage: harness")
    for command in ("init", "run", "tasks", "rm", "prune-tasks"):
        assert f"    {command} " in result.stdout


def test_version_names_the_version_and_the_distribution(tmp_path: Path) -> None:
    result = bare(tmp_path, "--version")

    assert result.returncode == 0
    assert re.fullmatch(r"harness \d+\.\d+\.\d+\S* \(harness-slack-agents\)\n", result.stdout)


def test_without_a_config_every_command_says_to_run_harness_init(tmp_path: Path) -> None:
    result = bare(tmp_path, "tasks")

    assert result.returncode == 2
    assert "config.yaml: (file): file not found" in result.stderr
    assert "run `harness init`" in result.stderr


def test_init_writes_a_project_that_the_next_commands_find_and_refuses_to_redo_it(
    tmp_path: Path,
) -> None:
    made = bare(tmp_path, "init", "team")
    assert made.returncode == 0, made.stderr
    assert "  cd team" in made.stdout
    assert (tmp_path / "team" / "roles" / "product-analyst.md").is_file()

    listing = bare(tmp_path / "team", "tasks")
    assert listing.returncode == 0, listing.stderr
    assert listing.stdout.startswith("No tasks yet.")
    found = bare(
        tmp_path, "tasks", env={**offline_env(tmp_path), "HARNESS_CONFIG": "team/config.yaml"}
    )
    assert found.returncode == 0, found.stderr

    again = bare(tmp_path, "init", "team")
    assert again.returncode == 2
    assert "config.yaml, roles/developer.md" in again.stderr
    assert "--force" in again.stderr


def test_config_may_name_the_folder_holding_config_yaml(tmp_path: Path) -> None:
    assert bare(tmp_path, "init", "team").returncode == 0

    by_option = bare(tmp_path, "tasks", "--config", "team")
    by_env = bare(tmp_path, "tasks", env={**offline_env(tmp_path), "HARNESS_CONFIG": "team"})
    no_config = bare(tmp_path, "tasks", "--config", ".")

    assert by_option.returncode == 0, by_option.stderr
    assert by_option.stdout.startswith("No tasks yet.")
    assert by_env.returncode == 0, by_env.stderr
    assert no_config.returncode == 2
    assert "Errno" not in no_config.stderr
    assert no_config.stderr.startswith("harness: config.yaml: (file): file not found")


def test_run_without_a_way_to_reach_a_model_stops_before_creating_a_task(
    project_dir: Path,
) -> None:
    result = bare(project_dir, "run", "plan: a settings page")

    assert result.returncode == 2
    assert "ANTHROPIC_API_KEY" in result.stderr
    assert "--scripted" in result.stderr
    assert task_folders(project_dir) == []


def test_run_help_documents_the_scripted_model(tmp_path: Path) -> None:
    result = bare(tmp_path, "run", "--help")

    assert "--scripted" in result.stdout
    assert "offline" in result.stdout


@pytest.mark.slow
def test_run_scripted_needs_no_key_and_tasks_lists_its_status_and_cost(project_dir: Path) -> None:
    run = bare(project_dir, "run", "--scripted", "plan: a settings page")

    assert run.returncode == 0, run.stderr
    assert run.stdout.startswith("product-analyst completed")
    assert "scripted" in run.stderr
    assert "(simulated)" in run.stdout.splitlines()[0]
    listing = bare(project_dir, "tasks")
    row = listing.stdout.splitlines()[1].split()
    assert (row[0], row[3], row[5], row[6]) == (
        "plan-a-settings-page",
        "completed",
        "(simulated)",  # kept with the task: nothing was paid for it
        "2",
    )
    assert re.fullmatch(r"\$\d+\.\d{4}", row[4])
    shown = bare(project_dir, "show", "plan-a-settings-page")
    assert "(simulated)" in shown.stdout


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


def age_tree(folder: Path, days: float) -> None:
    """Make everything in ``folder`` look last modified ``days`` ago."""
    when = time.time() - days * 86_400
    for path in [*folder.rglob("*"), folder]:
        os.utime(path, (when, when), follow_symlinks=False)


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
        result = subprocess.run(
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
