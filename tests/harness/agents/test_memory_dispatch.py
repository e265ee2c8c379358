"""Every agent the orchestrator starts gets its task's notes (its thread's channel's and its
repository's) in its prompt, within the context budget: a follow-up, a drafted agent and a
task without a thread alike; never another channel's."""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator

import pytest

from harness.agents.orchestrator import Orchestrator
from harness.project import Project, build_orchestrator
from harness.tasks.context import MEMORY_HEADING
from harness.tasks.model import ThreadRef
from harness.testing.held_runtime import HeldRuntime

pytestmark = pytest.mark.anyio

BUDGET = 3000


@pytest.fixture
async def held(project: Project) -> AsyncIterator[tuple[Orchestrator, HeldRuntime]]:
    config = dataclasses.replace(project.config, context_budget_chars=BUDGET)
    runtime = HeldRuntime()
    runtime.release()  # every agent finishes at once
    orchestrator = build_orchestrator(Project(config, project.roles), runtime)
    yield orchestrator, runtime
    await orchestrator.shutdown()


async def test_an_agent_gets_its_channels_notes_and_not_another_channels(
    held: tuple[Orchestrator, HeldRuntime],
) -> None:
    orchestrator, runtime = held
    await orchestrator.memory.add("channel:C1", "answer in French", by="U1")
    await orchestrator.memory.add("channel:C2", "the C2 secret is 4417", by="U2")
    ours = await orchestrator.tasks.create_task("fix it", ThreadRef("C1", "1.0"), requester="U1")
    loose = await orchestrator.tasks.create_task("fix it", None, requester="U1")

    for slug in (ours.slug, ours.slug, loose.slug):
        handle = await orchestrator.draft("developer", "fix it", task_slug=slug)
        await orchestrator.wait(handle.agent_id)

    first, follow_up, no_thread = (spec.prompt for spec in runtime.started)
    assert "- (this channel) answer in French" in first
    assert "- (this channel) answer in French" in follow_up and "## Task History" in follow_up
    assert MEMORY_HEADING not in no_thread
    assert all("4417" not in prompt for prompt in (first, follow_up, no_thread))


async def test_many_notes_are_cut_to_half_the_budget_and_the_prompt_says_where(
    held: tuple[Orchestrator, HeldRuntime],
) -> None:
    orchestrator, runtime = held
    for i in range(40):
        await orchestrator.memory.add("channel:C1", f"rule {i:02d}: " + "r" * 90, by="U1")
    task = await orchestrator.tasks.create_task("tidy up", ThreadRef("C1", "1.0"))

    handle = await orchestrator.draft("developer", "tidy up", task_slug=task.slug)
    await orchestrator.wait(handle.agent_id)

    [spec] = runtime.started
    memory = spec.prompt[: spec.prompt.index("## Your Assignment")]
    assert len(memory) <= BUDGET // 2 + 2
    assert "rule 00:" in memory and "rule 39:" not in memory
    assert "more note(s)" in memory and "cut here to fit the context budget" in memory
    assert spec.prompt.endswith("tidy up")
