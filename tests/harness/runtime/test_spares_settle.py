"""At the end of a burst, slots free one by one: no spare (a replacement or a follow-up's)
starts until the queue has stayed empty for the settling time, and then the replacement
and the follow-up spare of a task the burst's tail completed start by themselves, with no
agent left to nudge the pools. The real orchestrator and its pool,
the real Claude Code CLI in its sandbox against the scripted model."""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

from harness.project import Project, build_orchestrator
from harness.runtime.claude import ClaudeRuntime
from harness.runtime.host import AgentHost
from harness.runtime.spare_agent import WarmAgent
from harness.runtime.spec import AgentSpec, SpareLimits
from harness.testing.scripted_model import ScriptedModel
from harness.workspaces.manager import Workspaces
from tests.harness.agents.test_spares_under_load import Held

pytestmark = [pytest.mark.anyio, pytest.mark.slow, pytest.mark.subprocess, pytest.mark.waits]

SLOTS, BURST, WAIT = 2, 6, 120.0
SETTLE = SpareLimits().settle_seconds


class Watched:
    """What the spares' budget sees of the queue (the real pool's), and when each spare's
    CLI is started ahead, with whether agents queued at that moment."""

    def __init__(self, host: AgentHost) -> None:
        self.last_queued = 0.0
        self.starts: list[tuple[float, bool]] = []
        self._busy = host.spare_budget.busy
        host.spare_budget.busy = self.busy

    def busy(self) -> bool:
        queued = self._busy()
        if queued:
            self.last_queued = time.monotonic()
        return queued

    def warm(
        self, warm: Callable[[AgentSpec], Awaitable[WarmAgent]]
    ) -> Callable[[AgentSpec], Awaitable[WarmAgent]]:
        def started(template: AgentSpec) -> Awaitable[WarmAgent]:
            self.starts.append((time.monotonic(), self._busy()))
            return warm(template)

        return started


async def test_after_a_burst_no_spare_starts_until_the_queue_stayed_empty_then_they_do(
    project: Project, tmp_path: Path
) -> None:
    mcp = dataclasses.replace(project.config.mcp, max_concurrent_agents=SLOTS)
    config = dataclasses.replace(
        project.config, mcp=mcp, spares={"developer": 1}, follow_up_spares=1
    )
    held = Held()
    async with ScriptedModel(held) as model:
        runtime = ClaudeRuntime(base_env=model.env())
        host = AgentHost(runtime, Workspaces(config.workspaces))
        orchestrator = build_orchestrator(dataclasses.replace(project, config=config), host)
        spares, follow_ups = host.spares, host.follow_ups
        assert spares is not None and follow_ups is not None
        try:
            await orchestrator.keep_warm()
            watched = Watched(host)
            await spares.wait_ready(1, WAIT)
            handles = [await orchestrator.draft("developer", f"request {n}") for n in range(BURST)]
            await spares.settled(WAIT)  # what started before the queue formed
            before = (spares.started, follow_ups.started)
            runtime.warm = watched.warm(runtime.warm)  # type: ignore[method-assign,assignment]

            held.go.set()
            done = await asyncio.gather(*(orchestrator.wait(h.agent_id, WAIT) for h in handles))
            await spares.wait_ready(1, WAIT)  # the used spare is replaced, unnudged
            await spares.settled(WAIT)
            await follow_ups.settled(WAIT)
            waiting = list(follow_ups.ready_pids())  # the tasks whose follow-up spare waits
        finally:
            await orchestrator.shutdown()

    assert [d.status for d in done] == ["completed"] * BURST
    assert spares.served >= 1
    assert spares.started - before[0] == 1  # the replacement, once
    # Every task ended while agents queued or within the settling time: the last one's
    # follow-up spare was put off, not dropped, and started once the load settled.
    assert follow_ups.started - before[1] == 1
    assert waiting in [[h.task_slug] for h in handles]
    assert watched.starts, "no spare started after the burst"
    for started, queued in watched.starts:  # the replacement and any follow-up's spare
        assert not queued
        assert started - watched.last_queued >= SETTLE * 0.99
