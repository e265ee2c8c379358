"""Agents run by the real Claude Code CLI against the scripted model, through the orchestrator."""

from __future__ import annotations

import asyncio
import dataclasses
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from harness.agents.orchestrator import Orchestrator
from harness.config.roles import BUILTIN_TOOLS
from harness.project import Project, build_orchestrator
from harness.runtime.claude import ClaudeRuntime
from harness.runtime.spec import AgentControl, AgentSpec, Approval, RunIO, RunOutcome, ToolUse
from harness.testing.processes import claude_children
from harness.testing.scripted_model import ModelRequest, ScriptedModel, Turn
from harness.tools.gateway import HarnessTools
from tests.harness.conftest import HarnessFactory
from tests.support import latest_task

pytestmark = [pytest.mark.anyio, pytest.mark.slow]


def read_task_json(project: Project, slug: str) -> dict[str, Any]:
    path = project.config.tasks_dir / slug / "task.json"
    data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return data


async def test_a_run_stores_its_structured_result_in_task_json(
    harness_with: HarnessFactory, project: Project
) -> None:
    def script(request: ModelRequest) -> Turn:
        return Turn.finish("Added the page", ["settings.py"], ["no tests yet"], ["Dark mode?"])

    orchestrator, _ = await harness_with(script)
    record = await orchestrator.run("developer", "Add a settings page")

    assert record.status == "completed"
    stored = read_task_json(project, (await latest_task(orchestrator)).slug)
    assert stored["description"] == "Add a settings page"
    [dispatch] = stored["dispatches"]
    assert dispatch["status"] == "completed"
    assert dispatch["role"] == "developer"
    assert dispatch["result"] == {
        "summary": "Added the page",
        "changes": ["settings.py"],
        "issues": ["no tests yet"],
        "questions": ["Dark mode?"],
        "proposedNotes": [],
    }
    assert dispatch["costUsd"] > 0
    assert dispatch["turns"] >= 1
    assert dispatch["completedAt"]
    journal = project.config.tasks_dir / stored["slug"] / dispatch["journalFile"]
    lines = [json.loads(line) for line in journal.read_text(encoding="utf-8").splitlines()]
    assert lines[-1]["type"] == "ResultMessage"


async def test_a_follow_up_on_the_task_sees_the_first_result(harness_with: HarnessFactory) -> None:
    def script(request: ModelRequest) -> Turn:
        if "Build the UI" in request.first_user_text:
            return Turn.finish("UI built")
        return Turn.finish(
            "API ready", ["added /settings"], ["rate limit unknown"], ["Which auth?"]
        )

    orchestrator, model = await harness_with(script)
    first = await orchestrator.run("developer", "Build the settings API")
    slug = (await latest_task(orchestrator)).slug
    second = await orchestrator.run("reviewer", "Build the UI", task_slug=slug)

    assert (first.status, second.status) == ("completed", "completed")
    prompt = model.main_requests[-1].first_user_text
    for expected in ("Build the settings API", "API ready", "added /settings"):
        assert expected in prompt
    assert "rate limit unknown" in prompt
    assert "Which auth?" in prompt
    assert prompt.index("API ready") < prompt.index("Build the UI")
    assert len((await orchestrator.tasks.task(slug)).dispatches) == 2


async def test_the_reviewer_is_not_offered_write_edit_or_bash(harness_with: HarnessFactory) -> None:
    orchestrator, model = await harness_with(lambda request: Turn.finish("looks fine"))
    await orchestrator.run("reviewer", "review the change")

    tools = set(model.main_requests[0].tool_names)
    assert {"Read", "Glob", "Grep", "StructuredOutput"} <= tools
    assert not tools & {"Write", "Edit", "Bash", "NotebookEdit"}
    # Workers get the read-only harness tools, not draft/await/kill.
    assert "mcp__harness__list_tasks" in tools
    assert "mcp__harness__draft_agent" not in tools


async def test_the_role_prompt_is_appended_to_claude_codes_own(
    harness_with: HarnessFactory,
) -> None:
    orchestrator, model = await harness_with(lambda request: Turn.finish("done"))
    await orchestrator.run("developer", "do it")

    system = model.main_requests[0].system_text
    assert "Claude Code" in system
    assert orchestrator.role("developer").prompt.strip()[:60] in system


async def test_kill_during_a_slow_turn_ends_killed_and_the_child_is_gone(
    harness_with: HarnessFactory,
) -> None:
    orchestrator, model = await harness_with(lambda request: Turn(stall_seconds=60))
    handle = await orchestrator.draft("developer", "a long job")
    await model.wait_for_request(timeout=20)
    children = claude_children()
    assert children

    assert await orchestrator.kill(handle.agent_id, "stopped by a test")
    record = await orchestrator.wait(handle.agent_id, timeout=1.0)

    assert record.status == "killed"
    assert record.error == "stopped by a test"
    assert not claude_children() & children
    assert (await orchestrator.tasks.task(handle.task_slug)).dispatches[0].status == "killed"


async def test_a_model_that_never_returns_a_structured_result_fails_with_the_reason(
    harness_with: HarnessFactory,
) -> None:
    orchestrator, _ = await harness_with(lambda request: Turn.say("I think it is done."))
    record = await orchestrator.run("developer", "do it")

    assert record.status == "failed"
    assert record.error is not None
    assert "structured result" in record.error
    assert record.last_text is not None
    assert "I think it is done." in record.last_text


async def test_shutdown_marks_running_dispatches_interrupted_and_leaves_no_child(
    harness_with: HarnessFactory,
) -> None:
    orchestrator, model = await harness_with(lambda request: Turn(stall_seconds=60))
    handle = await orchestrator.draft("developer", "a long job")
    await model.wait_for_request(timeout=20)

    await asyncio.wait_for(orchestrator.shutdown("interrupted by SIGTERM"), 5)

    record = (await orchestrator.tasks.task(handle.task_slug)).dispatches[0]
    assert record.status == "interrupted"
    assert record.error == "interrupted by SIGTERM"
    assert not claude_children()


async def test_dispatches_left_running_by_a_crash_are_marked_interrupted(project: Project) -> None:
    from harness.tasks.model import DispatchRecord
    from harness.tasks.store import FileTaskStore

    store = FileTaskStore(project.config.tasks_dir)
    task = await store.create("crashed work")
    dead_pid = 2**22 + 1  # above pid_max's default: no such process
    await store.save_dispatch(
        task.slug,
        DispatchRecord(
            agent_id="a000001",
            role="developer",
            cwd=str(Path.cwd()),
            model=None,
            started_at="2026-01-01T00:00:00Z",
            status="running",
            journal_file="journals/a000001.jsonl",
            host_pid=dead_pid,
        ),
    )
    orchestrator = build_orchestrator(project)
    assert len(await orchestrator.recover_interrupted()) == 1
    [record] = (await store.get(task.slug)).dispatches
    assert record.status == "interrupted"
    assert record.error is not None
    assert str(dead_pid) in record.error


async def test_every_builtin_tool_name_a_role_may_list_is_offered_by_the_bundled_cli(
    harness_with: HarnessFactory,
) -> None:
    # Role files are checked against BUILTIN_TOOLS; when the bundled CLI changes, this says so.
    orchestrator, model = await harness_with(lambda request: Turn.finish("done"))
    role = dataclasses.replace(orchestrator.role("developer"), tools=BUILTIN_TOOLS)
    spec = AgentSpec(agent_id="a0000000001", role=role, prompt="list them", cwd=str(Path.cwd()))
    outcome = await run_alone(spec, orchestrator, model)
    assert outcome.status == "completed", outcome.error
    offered = set(model.main_requests[-1].tool_names)
    assert set(BUILTIN_TOOLS) <= offered, sorted(set(BUILTIN_TOOLS) - offered)


class ApprovingTools(HarnessTools):
    """The orchestrator's gateway, approving every built-in tool call (a person who always
    says yes): for an agent run alone, outside the pool the approvals look agents up in."""

    async def approve(self, agent_id: str, tool: str, args: Mapping[str, Any]) -> Approval:
        return Approval(True)


async def run_alone(
    spec: AgentSpec, orchestrator: Orchestrator, model: ScriptedModel
) -> RunOutcome:
    """One spec straight through the Claude runtime (no task, no pool), its harness tools
    served by the orchestrator's gateway and every other call approved."""

    async def ignore_tool_use(_use: ToolUse) -> None:
        return None

    io = RunIO(ApprovingTools(orchestrator.services), lambda _message: None, ignore_tool_use)
    return await ClaudeRuntime(base_env=model.env()).run(spec, AgentControl(), io)


async def test_an_agent_running_env_sees_no_slack_secret_but_the_model_api(
    harness_with: HarnessFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SLACK_BOT_TOKEN", "xoxb-never-to-an-agent")
    monkeypatch.setenv("SLACK_SIGNING_SECRET", "signing-never-to-an-agent")
    monkeypatch.setenv("DEPLOY_KEY", "deploy-never-to-an-agent")  # not on the allow-list

    def script(request: ModelRequest) -> Turn:
        if not request.tool_results:
            return Turn.call("Bash", command="env")
        return Turn.finish("ran env", issues=[request.tool_results[-1].text])

    orchestrator, model = await harness_with(script)
    role = orchestrator.role("developer")
    spec = AgentSpec(
        agent_id="a0000000002",
        role=role,
        prompt="print env",
        cwd=str(Path.cwd()),
    )
    outcome = await run_alone(spec, orchestrator, model)
    assert outcome.status == "completed", outcome.error
    assert outcome.result is not None
    [printed] = outcome.result.issues
    assert "ANTHROPIC_BASE_URL=" in printed  # the environment really was printed
    assert "never-to-an-agent" not in printed
