"""Every AgentRuntime behaves the same for the orchestrator: results, kills, records."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from harness.orchestrator import Orchestrator
from harness.project import Project, build_orchestrator
from harness.runtime import ClaudeRuntime
from harness.scripted_model import ModelRequest, ScriptedModel, Turn
from tests.fakes import HeldRuntime

pytestmark = pytest.mark.anyio


class Subject:
    """An orchestrator over one runtime, plus a way to let its agents finish."""

    def __init__(self, orchestrator: Orchestrator, release: Any) -> None:
        self.orchestrator = orchestrator
        self.release = release


@pytest.fixture(params=["claude", "held"])
async def subject(request: pytest.FixtureRequest, project: Project) -> AsyncIterator[Subject]:
    if request.param == "held":
        held = HeldRuntime()
        yield Subject(build_orchestrator(project, held), held.release)
        return
    gate: list[bool] = []

    def script(req: ModelRequest) -> Turn:
        if not gate:
            return Turn(stall_seconds=30)
        return Turn.finish(f"did: {req.first_user_text.splitlines()[-1]}")

    async with ScriptedModel(script) as model:
        orchestrator = build_orchestrator(project, ClaudeRuntime(base_env=model.env()))
        yield Subject(orchestrator, lambda: gate.append(True))
        await orchestrator.shutdown()


@pytest.mark.slow
async def test_a_released_agent_completes_with_its_result(subject: Subject) -> None:
    subject.release()
    record = await subject.orchestrator.run("developer", "write the code")
    assert record.status == "completed"
    assert record.result is not None
    assert record.result.summary == "did: write the code"


@pytest.mark.slow
async def test_a_killed_agent_ends_killed_with_the_reason(subject: Subject) -> None:
    handle = subject.orchestrator.draft("developer", "hold on")
    assert await subject.orchestrator.kill(handle.agent_id, "changed my mind")
    record = await subject.orchestrator.wait(handle.agent_id, 10)
    assert (record.status, record.error) == ("killed", "changed my mind")
    assert subject.orchestrator.agents() == []
