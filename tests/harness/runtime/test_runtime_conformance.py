"""Every AgentRuntime behaves the same for the orchestrator: the real one (the Claude Code CLI
against the scripted model) and the held one the fast tests use."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from harness.agents.orchestrator import Orchestrator
from harness.project import Project, build_orchestrator
from harness.runtime.claude import ClaudeRuntime
from harness.testing.held_runtime import HeldRuntime
from harness.testing.processes import claude_children
from harness.testing.scripted_model import ModelRequest, ScriptedModel, Turn
from tests.harness.runtime.suite import RuntimeConformance


class ClaudeSubject:
    """The CLI's agents stall at the scripted model until released."""

    spawns_processes = True
    orchestrator: Orchestrator
    model: ScriptedModel

    def __init__(self) -> None:
        self.released = False

    def script(self, request: ModelRequest) -> Turn:
        if not self.released:
            return Turn(stall_seconds=60)
        return Turn.finish(f"did: {request.first_user_text.strip().splitlines()[-1]}")

    def release(self) -> None:
        self.released = True

    async def reached(self, agent_id: str, timeout: float) -> bool:
        """The CLI runs the agent once the model has the agent's first request."""
        prompt = (await self.orchestrator.record(agent_id)).prompt or ""
        try:
            await self.model.wait_for_request(
                lambda r: not r.is_side_request and prompt in r.first_user_text, timeout
            )
        except TimeoutError:
            return False
        return True

    def processes(self) -> set[int]:
        return claude_children()


class HeldSubject:
    spawns_processes = False

    def __init__(self, orchestrator: Orchestrator, held: HeldRuntime) -> None:
        self.orchestrator = orchestrator
        self.held = held

    def release(self) -> None:
        self.held.release()

    async def reached(self, agent_id: str, timeout: float) -> bool:
        try:
            async with asyncio.timeout(timeout):
                while agent_id not in {spec.agent_id for spec in self.held.started}:
                    await self.held.wait_started(len(self.held.started) + 1, timeout)
        except TimeoutError:
            return False
        return True

    def processes(self) -> set[int]:
        return set()


@pytest.mark.slow
class TestClaudeRuntime(RuntimeConformance):
    @pytest.fixture
    async def subject(self, project: Project) -> AsyncIterator[ClaudeSubject]:
        subject = ClaudeSubject()
        async with ScriptedModel(subject.script) as subject.model:
            subject.orchestrator = build_orchestrator(
                project, ClaudeRuntime(base_env=subject.model.env())
            )
            try:
                yield subject
            finally:
                await subject.orchestrator.shutdown()


class TestHeldRuntime(RuntimeConformance):
    @pytest.fixture
    async def subject(self, project: Project) -> AsyncIterator[HeldSubject]:
        held = HeldRuntime()
        orchestrator = build_orchestrator(project, held)
        try:
            yield HeldSubject(orchestrator, held)
        finally:
            await orchestrator.shutdown()
