"""Every AgentRuntime behaves the same for the orchestrator: the real one (the Claude Code CLI
against the scripted model) and the held one the fast tests use."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import AsyncIterator

import pytest

from harness.agents.orchestrator import Orchestrator
from harness.project import Project, build_orchestrator
from harness.runtime.claude import ClaudeRuntime
from harness.runtime.host import AgentHost
from harness.testing.held_runtime import HeldRuntime
from harness.testing.processes import claude_children
from harness.testing.scripted_model import ModelRequest, ScriptedModel, Turn
from harness.workspaces.manager import Workspaces
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


class WarmClaudeSubject(ClaudeSubject):
    """The CLI's agents started ahead: each test's agent is served by a spare."""

    host: AgentHost

    async def reached(self, agent_id: str, timeout: float) -> bool:
        reached = await super().reached(agent_id, timeout)
        # The spare that replaces the one used is not this agent's process: none is kept.
        self.host.keep_warm([])
        assert self.host.spares is not None
        await self.host.spares.settled(timeout)
        return reached


@pytest.mark.slow
class TestWarmClaudeRuntime(RuntimeConformance):
    @pytest.fixture
    async def subject(self, project: Project) -> AsyncIterator[WarmClaudeSubject]:
        subject = WarmClaudeSubject()
        config = dataclasses.replace(project.config, spares={"developer": 1})
        async with ScriptedModel(subject.script) as subject.model:
            runtime = ClaudeRuntime(base_env=subject.model.env())
            subject.host = AgentHost(runtime, Workspaces(config.workspaces))
            warm = dataclasses.replace(project, config=config)
            subject.orchestrator = build_orchestrator(warm, subject.host)
            await subject.orchestrator.keep_warm()
            assert subject.host.spares is not None
            await subject.host.spares.wait_ready(1, 60)
            try:
                yield subject
                assert subject.host.spares.served == 1  # the test's agent started warm
            finally:
                await subject.orchestrator.shutdown()
