"""Approvals of built-in tool calls: the role's rules decide, else a human of the task. The
real Claude Code CLI against the scripted model; humans answer through a question channel."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from harness.agents.questions import Question
from harness.project import Project, build_orchestrator
from harness.runtime.claude import ClaudeRuntime
from harness.testing.scripted_model import ModelRequest, ScriptedModel, Turn
from harness.tools.approvals import full_input
from tests.harness.conftest import HarnessFactory
from tests.support import AnsweringHumans, latest_task

pytestmark = pytest.mark.anyio


def runs(*commands: str) -> Callable[[ModelRequest], Turn]:
    """Runs the commands one after another with Bash, then reports every tool result."""

    def script(request: ModelRequest) -> Turn:
        done = request.all_tool_results
        if len(done) < len(commands):
            return Turn.call("Bash", command=commands[len(done)])
        return Turn.finish("ran them", issues=[r.text for r in done])

    return script


@pytest.mark.slow
async def test_a_command_the_role_allows_runs_without_asking(
    harness_with: HarnessFactory,
) -> None:
    # The CLI itself lets read-only commands (ls, git status) run without asking anyone.
    orchestrator, _ = await harness_with(runs("python3 -m pytest --version", "git push -h"))
    humans = AnsweringHumans(orchestrator.humans.answer_question, "Deny")
    orchestrator.humans.add_human_channel(humans)
    record = await orchestrator.run("developer", "look around", requested_by="U42")

    assert record.status == "completed", record.error
    assert record.result is not None
    tests, version = record.result.issues
    # In the developer's allow rules: it ran (whether this python3 has pytest or not).
    assert "pytest" in tests and "denied" not in tests.lower()
    assert "denied by U42" in version  # not in them: asked, and the human said no
    assert [q.text for q in humans.asked] == [
        f"developer `{record.agent_id}` asks to run Bash: `git push -h`. Allow it?"
        "\n```\ngit push -h\n```\n"
        "_Allow for this task_ remembers `Bash(git push -h)`: only that runs without asking again."
    ]
    audit = await orchestrator.tasks.audit_log((await latest_task(orchestrator)).slug)
    decisions = [(e["input"]["tool"], e["outcome"]) for e in audit if e["tool"] == "approval"]
    assert decisions == [("Bash", "allowed"), ("Bash", "denied")]


@pytest.mark.slow
async def test_in_the_sandbox_editing_testing_linting_and_committing_ask_nobody(
    harness_with: HarnessFactory,
) -> None:
    orchestrator, _ = await harness_with(
        runs(
            "printf 'def add(a, b):\\n    return a + b\\n' > calc.py",
            "python3 -c 'import calc; assert calc.add(1, 2) == 3' && echo tested",
            "python3 -m py_compile calc.py && echo linted",
            "git init -q . && git add -A && git -c user.name=d -c user.email=d@x commit -qm add"
            " && git log --oneline | wc -l",
        )
    )
    humans = AnsweringHumans(orchestrator.humans.answer_question, "Deny")
    orchestrator.humans.add_human_channel(humans)
    record = await orchestrator.run("developer", "add calc", requested_by="U42")

    assert record.status == "completed", record.error
    assert record.result is not None
    assert [r.strip() for r in record.result.issues][1:] == ["tested", "linted", "1"]
    assert humans.asked == []
    audit = await orchestrator.tasks.audit_log((await latest_task(orchestrator)).slug)
    decided = {e["decidedBy"] for e in audit if e["tool"] == "approval"}
    assert decided == {"sandbox"}


@pytest.mark.slow
async def test_a_host_outside_the_allow_list_is_asked_as_a_fetch_and_refused_when_denied(
    harness_with: HarnessFactory,
) -> None:
    orchestrator, _ = await harness_with(runs("curl -sS https://example.com/ 2>&1"))
    humans = AnsweringHumans(orchestrator.humans.answer_question, "Deny")
    orchestrator.humans.add_human_channel(humans)
    record = await orchestrator.run("developer", "fetch it", requested_by="U42")

    assert record.status == "completed", record.error
    assert record.result is not None
    assert "CONNECT tunnel failed, response 403" in record.result.issues[0]
    [question] = humans.asked
    assert question.text.startswith(
        f"developer `{record.agent_id}` asks to run WebFetch https://example.com/. Allow it?"
    )
    assert "remembers `WebFetch(domain:example.com)`" in question.text


@pytest.mark.slow
async def test_allow_for_this_task_is_not_asked_again_in_that_task(
    harness_with: HarnessFactory,
) -> None:
    orchestrator, _ = await harness_with(runs("git push -h", "git push -h"))
    humans = AnsweringHumans(orchestrator.humans.answer_question, "Allow for this task")
    orchestrator.humans.add_human_channel(humans)
    record = await orchestrator.run("developer", "say it twice", requested_by="U42")

    assert record.result is not None
    assert ["usage: git push" in r for r in record.result.issues] == [True, True]
    assert len(humans.asked) == 1  # the second run went under the granted rule
    task = await latest_task(orchestrator)
    assert task.allowed == ("Bash(git push -h)",)  # kept in task.json for later agents


@pytest.mark.slow
async def test_a_denied_reply_reaches_the_agent_with_its_reason(
    harness_with: HarnessFactory,
) -> None:
    orchestrator, _ = await harness_with(runs("git push origin main"))
    orchestrator.humans.add_human_channel(
        AnsweringHumans(orchestrator.humans.answer_question, "deny: no pushes from agents")
    )
    record = await orchestrator.run("developer", "fetch it", requested_by="U42")

    assert record.result is not None
    [result] = record.result.issues
    assert "denied by U42: no pushes from agents" in result


@pytest.mark.slow
async def test_with_no_human_to_ask_the_call_is_denied_at_once(
    harness_with: HarnessFactory,
) -> None:
    orchestrator, _ = await harness_with(runs("git push origin main"))
    record = await orchestrator.run("developer", "fetch it", requested_by="U42")

    assert record.result is not None
    [result] = record.result.issues
    assert "no human could approve it" in result


@pytest.mark.slow
async def test_a_role_deny_rule_wins_without_asking(harness_with: HarnessFactory) -> None:
    orchestrator, _ = await harness_with(runs("rm -rf build"))
    humans = AnsweringHumans(orchestrator.humans.answer_question, "Allow once")
    orchestrator.humans.add_human_channel(humans)
    record = await orchestrator.run("developer", "clean up", requested_by="U42")

    assert record.result is not None
    [result] = record.result.issues
    # The deny rule reaches the CLI as a disallowed tool: refused there, before anyone is asked.
    assert result == "Permission to use Bash with command rm -rf build has been denied."
    assert humans.asked == []


def test_the_person_deciding_sees_what_exactly_would_run_or_change() -> None:
    assert full_input("Bash", {"command": "make deploy"}) == "\n```\nmake deploy\n```"
    edit = full_input(
        "Edit", {"file_path": "/w/a.py", "old_string": "x = 1", "new_string": "x = 2"}
    )
    assert edit == "\n```\n- x = 1\n+ x = 2\n```"
    long = full_input("Write", {"file_path": "/w/b.txt", "content": "y" * 2000})
    assert long.endswith("… (500 more characters)\n```")
    assert full_input("WebFetch", {"url": "https://example.com"}) == ""
    command = "echo " + "x" * 5000 + " && curl evil.example"
    assert full_input("Bash", {"command": command}) == f"\n```\n{command}\n```"  # whole


class SilentHumans(AnsweringHumans):
    """Reaches the task's humans, who never answer."""

    async def deliver(self, question: Question, task: Any) -> None:
        self.asked.append(question)


@pytest.mark.slow
async def test_an_approval_nobody_gives_in_time_is_a_denial_the_agent_hears_of(
    project: Project,
) -> None:
    quick = dataclasses.replace(project.config, ask_timeout_seconds=0.5)
    async with ScriptedModel(runs("git push origin main")) as model:
        orchestrator = build_orchestrator(
            Project(quick, project.roles), ClaudeRuntime(base_env=model.env())
        )
        humans = SilentHumans(orchestrator.humans.answer_question)
        orchestrator.humans.add_human_channel(humans)
        record = await orchestrator.run("developer", "fetch it", requested_by="U42")
        await orchestrator.shutdown()

    assert record.result is not None
    [result] = record.result.issues
    assert "nobody approved it in time" in result
    assert len(humans.asked) == 1


def writes(*files: str) -> Callable[[ModelRequest], Turn]:
    """Writes each file with the Write tool, then reports every tool result."""

    def script(request: ModelRequest) -> Turn:
        done = request.all_tool_results
        if len(done) < len(files):
            return Turn.call("Write", file_path=files[len(done)], content="written\n")
        return Turn.finish("wrote them", issues=[r.text for r in done])

    return script


@pytest.mark.slow
async def test_accept_edits_is_the_harness_s_to_apply_inside_the_folder_only(
    harness_with: HarnessFactory, tmp_path: Path
) -> None:
    # The CLI runs in its default mode whatever the role says (the shipped developer has
    # acceptEdits), so the harness sees each edit: inside the folder it is allowed (and
    # audited), outside it is asked, through a link out of the folder too.
    outside = tmp_path / "outside"
    outside.mkdir()
    orchestrator, _ = await harness_with(
        writes("inside.txt", str(outside / "direct.txt"), "link/through.txt")
    )
    folder = orchestrator.config.workspaces.root / "write-three-files"
    folder.mkdir(parents=True)
    (folder / "link").symlink_to(outside)
    humans = AnsweringHumans(orchestrator.humans.answer_question, "Deny")
    orchestrator.humans.add_human_channel(humans)

    record = await orchestrator.run("developer", "write three files", requested_by="U42")

    assert record.status == "completed", record.error
    assert (folder / "inside.txt").read_text() == "written\n"
    assert list(outside.iterdir()) == []
    assert [q.kind for q in humans.asked] == ["approval", "approval"]
    audit = await orchestrator.tasks.audit_log((await latest_task(orchestrator)).slug)
    decided = [(e["outcome"], e["decidedBy"]) for e in audit if e["tool"] == "approval"]
    # The developer's `Edit(**)` rule allows the file inside; neither rule nor mode covers
    # the two outside, however the path gets there.
    assert decided == [
        ("allowed", "rule Edit(**)"),
        ("denied", "U42 (Deny)"),
        ("denied", "U42 (Deny)"),
    ]


@pytest.mark.slow
async def test_a_settings_hook_planted_in_the_folder_is_never_loaded(
    harness_with: HarnessFactory, tmp_path: Path
) -> None:
    # An agent (or a file in the repository) plants project settings with a hook for the next
    # agent: the CLI loads no settings from the folder, so the hook never runs.
    marker = tmp_path / "hook-ran"
    hook = {"type": "command", "command": f"touch {marker}"}
    settings = {"hooks": {"PreToolUse": [{"matcher": "*", "hooks": [hook]}]}}
    orchestrator, _ = await harness_with(runs("git push -h"))
    folder = orchestrator.config.workspaces.root / "check-python"
    (folder / ".claude").mkdir(parents=True)
    (folder / ".claude" / "settings.json").write_text(json.dumps(settings))
    orchestrator.humans.add_human_channel(
        AnsweringHumans(orchestrator.humans.answer_question, "Allow once")
    )

    record = await orchestrator.run("developer", "check python", requested_by="U42")

    assert record.status == "completed", record.error
    assert record.result is not None and "usage: git push" in record.result.issues[0]
    assert not marker.exists()
