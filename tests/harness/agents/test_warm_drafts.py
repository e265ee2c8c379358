"""Drafted agents start warm where a spare fits: a coordinator that drafts a developer after
another gets the spare the first one left in the task's folder, even while that spare is
still starting. The real Claude Code CLI, in its sandbox, against the scripted model."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from harness.config.settings import Config
from harness.project import Project, build_orchestrator
from harness.runtime.claude import ClaudeRuntime
from harness.runtime.host import AgentHost
from harness.testing.scripted_model import ModelRequest, ScriptedModel, Turn
from harness.workspaces.manager import Workspaces

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

DRAFT, AWAIT = "mcp__harness__draft_agent", "mcp__harness__await_agent"


def two_steps(request: ModelRequest) -> Turn:
    """A coordinator drafts a developer for step 1, awaits it, then the same for step 2."""
    if request.is_side_request:
        return Turn.say("drafting")
    if DRAFT not in request.tool_names:
        return Turn.finish(f"did {request.first_user_text.strip().splitlines()[-1]}")
    last = request.tool_results
    if last and last[-1].tool_name == DRAFT:
        return Turn.call(AWAIT, agentId=last[-1].json()["agentId"])
    awaited = [r for r in request.all_tool_results if r.tool_name == AWAIT]
    if len(awaited) < 2:
        return Turn.call(DRAFT, role="developer", prompt=f"step {len(awaited) + 1}")
    return Turn.finish("both steps done")


async def test_a_coordinators_second_developer_starts_on_the_spare_the_first_left(
    project: Project, tmp_path: Path
) -> None:
    config: Config = dataclasses.replace(project.config, spares={}, follow_up_spares=1)
    async with ScriptedModel(two_steps) as model:
        host = AgentHost(ClaudeRuntime(base_env=model.env()), Workspaces(config.workspaces))
        orchestrator = build_orchestrator(dataclasses.replace(project, config=config), host)
        try:
            await orchestrator.keep_warm()
            done = await orchestrator.run("product-analyst", "plan: two steps")
        finally:
            await orchestrator.shutdown()

    assert done.status == "completed", done.error
    assert host.follow_ups is not None and host.follow_ups.served == 1
    steps = [r.first_user_text for r in model.main_requests if DRAFT not in r.tool_names]
    assert any("step 1" in text for text in steps) and any("step 2" in text for text in steps)
