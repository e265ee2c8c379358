"""The limits on agents (depth, a task's budget, agents at once) are the harness's own: proven
here on held agents, their tools called as an agent's MCP server calls them. The real CLI meets
them in test_mcp_flows.py (a refusal reaching the model as a coded error, real CLIs queued
behind a cap of one)."""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import AsyncIterator
from typing import Any

import pytest

from harness.agents.orchestrator import Orchestrator
from harness.project import Project, build_orchestrator
from harness.testing.held_runtime import HeldRuntime
from harness.tools.gateway import HarnessTools
from tests.support import latest_task

pytestmark = pytest.mark.anyio


@contextlib.asynccontextmanager
async def held(project: Project, **mcp: Any) -> AsyncIterator[tuple[Orchestrator, HeldRuntime]]:
    """An orchestrator whose agents are held until released, ``mcp`` settings overridden."""
    runtime = HeldRuntime()
    config = dataclasses.replace(project.config, mcp=dataclasses.replace(project.config.mcp, **mcp))
    orchestrator = build_orchestrator(dataclasses.replace(project, config=config), runtime)
    try:
        yield orchestrator, runtime
    finally:
        runtime.release()
        await orchestrator.shutdown()


async def test_draft_beyond_the_depth_limit_is_refused_and_audited(project: Project) -> None:
    async with held(project, max_depth=1) as (orchestrator, runtime):
        tools = HarnessTools(orchestrator.services)
        analyst = await orchestrator.draft("product-analyst", "plan: deep work")
        await runtime.wait_started(1)

        refusal = await tools.call(
            analyst.agent_id, "draft_agent", {"role": "developer", "prompt": "the deep part"}
        )

        assert refusal.is_error
        error = refusal.payload["error"]
        assert error["code"] == "DEPTH_LIMIT_EXCEEDED"
        assert "mcp.maxDepth" in error["suggestion"]
        runtime.release()
        assert (await orchestrator.wait(analyst.agent_id, 5)).status == "completed"
        task = await latest_task(orchestrator)
        assert [d.role for d in task.dispatches] == ["product-analyst"]
        [entry] = await orchestrator.tasks.audit_log(task.slug)
        assert (entry["tool"], entry["outcome"]) == ("draft_agent", "DEPTH_LIMIT_EXCEEDED")


async def test_draft_over_the_task_budget_is_refused(project: Project) -> None:
    async with held(project, task_budget_usd=1e-9) as (orchestrator, runtime):
        runtime.release()  # the first agent finishes at once, its cost reported
        first = await orchestrator.run("developer", "build it")
        assert first.cost_usd
        slug = (await latest_task(orchestrator)).slug

        reply = await HarnessTools(orchestrator.services).invoke(
            "draft_agent", {"role": "developer", "prompt": "more", "taskSlug": slug}, None
        )

        assert reply.is_error
        error = reply.payload["error"]
        assert error["code"] == "BUDGET_EXCEEDED"
        assert error["suggestion"].startswith("finish with what you have and report it")
        assert "mcp.taskBudgetUsd" in error["suggestion"]
        assert len((await orchestrator.tasks.task(slug)).dispatches) == 1


async def test_agents_beyond_the_cap_queue_and_run_in_order(project: Project) -> None:
    async with held(project, max_concurrent_agents=1) as (orchestrator, runtime):
        first = await orchestrator.draft("developer", "the first job")
        second = await orchestrator.draft("developer", "the second job")
        await runtime.wait_started(1)

        statuses = {a.agent_id: a.status for a in orchestrator.agents()}
        assert statuses == {first.agent_id: "running", second.agent_id: "queued"}
        assert (await orchestrator.record(second.agent_id)).status == "queued"
        assert [spec.agent_id for spec in runtime.started] == [first.agent_id]
        runtime.release()
        done = [await orchestrator.wait(h.agent_id, 30) for h in (first, second)]
        assert [d.status for d in done] == ["completed", "completed"]
        assert done[0].completed_at is not None and done[1].started_at >= done[0].completed_at
