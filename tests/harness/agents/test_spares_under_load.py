"""Spares step aside under load: while agents queue behind `maxConcurrentAgents`, no follow-up
spare and no replacement spare starts (each would take the CPU the queued agents need, and
be closed unused); once the queue is empty they start again. The real orchestrator and its
pool, the real Claude Code CLI in its sandbox against the scripted model."""

from __future__ import annotations

import asyncio
import dataclasses
from pathlib import Path

import pytest

from harness.project import Project, build_orchestrator
from harness.runtime.claude import ClaudeRuntime
from harness.runtime.host import AgentHost
from harness.testing.scripted_model import ModelRequest, ScriptedModel, Turn
from harness.workspaces.manager import Workspaces

pytestmark = [pytest.mark.anyio, pytest.mark.slow, pytest.mark.subprocess, pytest.mark.waits]

SLOTS, BURST, WAIT = 2, 7, 120.0


class Held:
    """Every agent's first model call waits until the test lets them go: the whole burst is
    queued before any agent ends."""

    def __init__(self) -> None:
        self.go = asyncio.Event()

    async def __call__(self, request: ModelRequest) -> Turn:
        await self.go.wait()
        return Turn.finish("done")


async def test_a_burst_larger_than_the_cap_starts_no_follow_up_or_replacement_spare_while_queued(
    project: Project, tmp_path: Path
) -> None:
    mcp = dataclasses.replace(project.config.mcp, max_concurrent_agents=SLOTS)
    config = dataclasses.replace(
        project.config, mcp=mcp, spares={"developer": 1}, follow_up_spares=1
    )
    held = Held()
    async with ScriptedModel(held) as model:
        host = AgentHost(ClaudeRuntime(base_env=model.env()), Workspaces(config.workspaces))
        orchestrator = build_orchestrator(dataclasses.replace(project, config=config), host)
        spares, follow_ups = host.spares, host.follow_ups
        assert spares is not None and follow_ups is not None
        try:
            await orchestrator.keep_warm()
            await spares.wait_ready(1, WAIT)
            handles = [await orchestrator.draft("developer", f"request {n}") for n in range(BURST)]
            await spares.settled(WAIT)  # what started before the queue formed
            before = (spares.started, follow_ups.started)

            held.go.set()
            done = await asyncio.gather(*(orchestrator.wait(h.agent_id, WAIT) for h in handles))
            await spares.settled(WAIT)
            await follow_ups.settled(WAIT)
        finally:
            await orchestrator.shutdown()

    assert [d.status for d in done] == ["completed"] * BURST
    assert spares.served >= 1  # the first request, at once
    # Only the agents that ended once nobody queued any more (the last SLOTS) may leave a
    # follow-up spare, and only then may a used spare be replaced; before, one started per
    # completed agent, and the next completion closed it.
    assert follow_ups.started - before[1] <= SLOTS
    assert spares.started - before[0] <= 1
