"""Agents driving agents through the harness MCP tools: the real CLI against the scripted model."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import pytest

from harness.config.settings import McpSettings
from harness.testing.scripted_model import (
    ModelRequest,
    ToolResultView,
    Turn,
    demo_script,
)
from tests.harness.conftest import HarnessFactory
from tests.support import latest_task

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

DRAFT = "mcp__harness__draft_agent"
AWAIT = "mcp__harness__await_agent"
KILL = "mcp__harness__kill_agent"

Step = Callable[[Sequence[ToolResultView]], Turn]
Worker = Callable[[ModelRequest], Turn | Awaitable[Turn]]


def coordinator(steps: Sequence[Step], worker: Worker) -> Callable[[ModelRequest], Any]:
    """A script: coordinators (offered draft_agent) take ``steps`` in turn, given the tool
    results so far; every other agent is answered by ``worker``."""

    def script(request: ModelRequest) -> Turn | Awaitable[Turn]:
        if DRAFT not in request.tool_names:
            return worker(request)
        turn = sum(1 for m in request.messages if m.get("role") == "assistant")
        return steps[turn](request.all_tool_results)

    return script


def last_json(results: Sequence[ToolResultView]) -> dict[str, Any]:
    value = results[-1].json()
    assert isinstance(value, dict), results[-1].text
    return value


async def test_analyst_drafts_and_awaits_a_developer_and_reports_its_result(
    harness_with: HarnessFactory,
) -> None:
    orchestrator, model = await harness_with(demo_script)
    record = await orchestrator.run("product-analyst", "plan: a settings page")

    assert record.status == "completed", record.error
    task = await latest_task(orchestrator)
    analyst, developer = sorted(task.dispatches, key=lambda d: d.parent_id is not None)
    assert developer.role == "developer"
    assert developer.parent_id == analyst.agent_id
    assert developer.status == "completed"
    assert developer.result is not None and record.result is not None
    assert developer.result.summary in record.result.summary
    # The developer was offered the read-only (and human-facing) harness tools only.
    dev_request = next(r for r in model.main_requests if DRAFT not in r.tool_names)
    harness_tools = {t for t in dev_request.tool_names if t.startswith("mcp__harness__")}
    assert harness_tools == {
        "mcp__harness__list_agents",
        "mcp__harness__show_agent",
        "mcp__harness__list_tasks",
        "mcp__harness__get_task_context",
        "mcp__harness__ask_human",
        "mcp__harness__update_progress",
        "mcp__harness__log_decision",
        "mcp__harness__share_file",
    }
    # Its prompt holds the task's history first, then the assignment.
    assert dev_request.first_user_text.index("plan: a settings page") < (
        dev_request.first_user_text.index("## Your Assignment")
    )
    audit = await orchestrator.tasks.audit_log(task.slug)
    assert [(e["tool"], e["outcome"]) for e in audit] == [
        ("draft_agent", "ok"),
        ("await_agent", "ok"),
    ]
    assert all(e["callerAgentId"] == analyst.agent_id for e in audit)
    assert all(e["callerRole"] == "product-analyst" for e in audit)
    assert audit[0]["input"]["role"] == "developer"


async def test_two_parallel_drafts_are_both_awaited(harness_with: HarnessFactory) -> None:
    def draft_two(_: Sequence[ToolResultView]) -> Turn:
        return Turn(
            tool_calls=(
                _call(DRAFT, role="developer", prompt="build the API"),
                _call(DRAFT, role="reviewer", prompt="review the API design"),
            )
        )

    def await_both(results: Sequence[ToolResultView]) -> Turn:
        ids = [r.json()["agentId"] for r in results[-2:]]
        return Turn(tool_calls=tuple(_call(AWAIT, agentId=i) for i in ids))

    def finish(results: Sequence[ToolResultView]) -> Turn:
        summaries = [r.json()["result"]["summary"] for r in results[-2:]]
        return Turn.finish(" + ".join(summaries))

    def worker(request: ModelRequest) -> Turn:
        return Turn.finish("API built" if "build the API" in request.first_user_text else "OK")

    orchestrator, _ = await harness_with(coordinator([draft_two, await_both, finish], worker))
    record = await orchestrator.run("product-analyst", "plan: the API")

    assert record.result is not None
    assert record.result.summary == "API built + OK"
    task = await latest_task(orchestrator)
    assert sorted(d.role for d in task.dispatches) == ["developer", "product-analyst", "reviewer"]


async def test_kill_agent_stops_a_slow_developer(harness_with: HarnessFactory) -> None:
    def draft(_: Sequence[ToolResultView]) -> Turn:
        return Turn.call(DRAFT, role="developer", prompt="a very slow job")

    def kill(results: Sequence[ToolResultView]) -> Turn:
        return Turn.call(KILL, agentId=last_json(results)["agentId"])

    def finish(results: Sequence[ToolResultView]) -> Turn:
        return Turn.finish(last_json(results)["message"])

    orchestrator, _ = await harness_with(
        coordinator([draft, kill, finish], lambda request: Turn(stall_seconds=60))
    )
    record = await asyncio.wait_for(orchestrator.run("product-analyst", "plan: x"), 30)

    assert record.result is not None
    assert "stopped (killed)" in record.result.summary
    [developer] = [d for d in (await latest_task(orchestrator)).dispatches if d.role == "developer"]
    assert developer.status == "killed"
    assert developer.error is not None
    assert f"agent {record.agent_id} (product-analyst)" in developer.error


async def test_a_bad_tool_input_reaches_the_model_as_a_coded_error(
    harness_with: HarnessFactory,
) -> None:
    # The real CLI's proof that a refusal reaches the model; the limits' own refusals (depth,
    # budget) are proven on held agents in test_limits.py.
    def bad_draft(_: Sequence[ToolResultView]) -> Turn:
        return Turn.call(DRAFT, role="wizard", prompt="do magic")

    def finish(results: Sequence[ToolResultView]) -> Turn:
        return Turn.finish("could not draft", issues=[results[-1].text])

    orchestrator, _ = await harness_with(coordinator([bad_draft, finish], demo_script))
    record = await orchestrator.run("product-analyst", "plan: magic")

    assert record.result is not None
    [issue] = record.result.issues
    assert '"code": "INVALID_INPUT"' in issue
    assert "unknown role 'wizard'" in issue
    assert "developer, product-analyst, reviewer" in issue


async def test_a_coordinator_awaiting_lends_its_slot_so_a_cap_of_one_cannot_deadlock(
    harness_with: HarnessFactory,
) -> None:
    # Real CLIs queued behind a cap of one (the queue's order: test_limits.py, held agents).
    orchestrator, _ = await harness_with(demo_script, max_concurrent_agents=1)
    record = await asyncio.wait_for(orchestrator.run("product-analyst", "plan: tiny"), 30)
    assert record.status == "completed"
    assert len((await latest_task(orchestrator)).dispatches) == 2


def _call(name: str, **tool_input: Any) -> Any:
    return Turn.call(name, **tool_input).tool_calls[0]


def test_settings_defaults_match_the_documented_governance() -> None:
    settings = McpSettings()
    assert (settings.max_depth, settings.max_concurrent_agents) == (3, 4)
    assert settings.full_access_categories == ("conversational",)
