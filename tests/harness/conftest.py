"""An orchestrator whose agents run the real Claude Code CLI against a scripted model."""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, Protocol

import pytest

from harness.agents.orchestrator import Orchestrator
from harness.config.settings import Config
from harness.project import Project, build_orchestrator
from harness.runtime.claude import ClaudeRuntime
from harness.testing.scripted_model import Script, ScriptedModel


class HarnessFactory(Protocol):
    def __call__(
        self, script: Script, *, tune: Callable[[Config], Config] = ..., **mcp: Any
    ) -> Awaitable[tuple[Orchestrator, ScriptedModel]]: ...


@pytest.fixture
async def harness_with(project: Project) -> AsyncIterator[HarnessFactory]:
    """``await harness_with(script, max_depth=1)``: mcp settings may be overridden (and any
    other with ``tune``, given the config); both the orchestrator and the model are shut down
    after the test."""
    started: list[tuple[Orchestrator, ScriptedModel]] = []

    async def make(
        script: Script, *, tune: Callable[[Config], Config] = lambda c: c, **mcp: Any
    ) -> tuple[Orchestrator, ScriptedModel]:
        model = ScriptedModel(script)
        await model.start()
        config = tune(
            dataclasses.replace(project.config, mcp=dataclasses.replace(project.config.mcp, **mcp))
        )
        tuned = dataclasses.replace(project, config=config)
        orchestrator = build_orchestrator(tuned, ClaudeRuntime(base_env=model.env()))
        started.append((orchestrator, model))
        return orchestrator, model

    yield make
    for orchestrator, model in started:
        await orchestrator.shutdown()
        await model.stop()
