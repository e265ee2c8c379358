"""The orchestrator over a held runtime: identities, specs, restarts, refusals."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from harness.agents.orchestrator import Orchestrator
from harness.clock import SystemClock
from harness.errors import HarnessError
from harness.project import Project, build_orchestrator
from harness.runtime.host import AgentHost
from harness.runtime.spec import AgentSpec
from harness.tasks.files import FileTaskStore
from harness.tasks.model import DispatchRecord, Task
from harness.testing.held_runtime import HeldRuntime
from harness.tools.gateway import HarnessTools
from harness.workspaces.manager import Workspaces

pytestmark = pytest.mark.anyio


@pytest.fixture
async def held(project: Project) -> AsyncIterator[tuple[Orchestrator, HeldRuntime]]:
    runtime = HeldRuntime()
    orchestrator = build_orchestrator(project, runtime)
    yield orchestrator, runtime
    await orchestrator.shutdown()


class ScriptedIds(SystemClock):
    """The real time, and the ids drawn from ``draws`` (then random ones)."""

    def __init__(self, draws: list[str]) -> None:
        self.draws = draws

    def token(self, nbytes: int) -> str:
        return self.draws.pop(0) if nbytes == 5 and self.draws else super().token(nbytes)


async def test_agent_ids_are_ten_hex_digits_and_never_reuse_a_stored_id(
    project: Project,
) -> None:
    # The id source repeats the first id once: the store knows it, so it is skipped.
    ids = ScriptedIds(["00000000aa", "00000000aa", "0123456789"])
    runtime = HeldRuntime()
    runtime.release()
    orchestrator = build_orchestrator(project, runtime, clock=ids)

    first = await orchestrator.run("developer", "one")
    second = await orchestrator.run("developer", "two")

    assert (first.agent_id, second.agent_id) == ("a00000000aa", "a0123456789")
    assert ids.draws == []
    await orchestrator.shutdown()


async def test_a_finished_agent_is_answered_from_the_store_after_a_restart(
    project: Project,
) -> None:
    runtime = HeldRuntime()
    runtime.release()
    first = build_orchestrator(project, runtime)
    record = await first.run("developer", "remember me")
    await first.shutdown()

    again = build_orchestrator(project, HeldRuntime())
    assert await again.wait(record.agent_id) == record
    assert (await again.record(record.agent_id)).result == record.result
    assert again.agents() == []


async def test_the_spec_a_runtime_gets_is_plain_data_that_survives_json(
    held: tuple[Orchestrator, HeldRuntime],
) -> None:
    orchestrator, runtime = held
    await orchestrator.draft("product-analyst", "plan: a settings page")
    await runtime.wait_started(1)
    [spec] = runtime.started
    text = json.dumps(spec.to_json())
    assert AgentSpec.from_json(json.loads(text)) == spec
    assert "mcp__harness__draft_agent" in spec.harness_tool_names
    schema = next(t.input_schema for t in spec.harness_tools if t.name == "draft_agent")
    assert schema["required"] == ["role", "prompt"]


async def test_a_worker_is_offered_only_the_tools_of_its_category(
    held: tuple[Orchestrator, HeldRuntime],
) -> None:
    orchestrator, runtime = held
    await orchestrator.draft("developer", "build it")
    await runtime.wait_started(1)
    names = {t.name for t in runtime.started[0].harness_tools}
    assert "list_tasks" in names and "ask_human" in names
    assert not names & {"draft_agent", "await_agent", "kill_agent", "open_pull_request"}


async def test_an_empty_prompt_is_refused_before_any_task_is_created(
    held: tuple[Orchestrator, HeldRuntime],
) -> None:
    orchestrator, _ = held
    with pytest.raises(HarnessError, match="prompt is empty"):
        await orchestrator.draft("developer", "  \n ")
    assert await orchestrator.tasks.task_summaries() == []


async def test_no_agent_starts_once_shutdown_began(
    held: tuple[Orchestrator, HeldRuntime],
) -> None:
    orchestrator, runtime = held
    await orchestrator.shutdown()
    with pytest.raises(HarnessError, match="shutting down"):
        await orchestrator.draft("developer", "too late")
    assert runtime.started == []


async def test_a_task_is_not_deleted_under_its_running_agent_unless_forced(
    held: tuple[Orchestrator, HeldRuntime],
) -> None:
    orchestrator, runtime = held
    handle = await orchestrator.draft("developer", "build it")
    await runtime.wait_started(1)

    with pytest.raises(HarnessError, match=f"has agents at work: developer {handle.agent_id}"):
        await orchestrator.tasks.delete_task(handle.task_slug)
    assert [t.slug for t in await orchestrator.tasks.task_summaries()] == [handle.task_slug]

    runtime.release()
    await orchestrator.wait(handle.agent_id)
    deleted = await orchestrator.tasks.delete_task(handle.task_slug)
    assert deleted is not None and deleted.dispatches[0].status == "completed"
    assert await orchestrator.tasks.task_summaries() == []


async def test_a_task_that_cannot_be_read_is_deleted_only_when_forced(
    held: tuple[Orchestrator, HeldRuntime],
) -> None:
    orchestrator, _ = held
    task = await orchestrator.tasks.create_task("build it")
    (orchestrator.config.tasks_dir / task.slug / "task.json").write_text("{", encoding="utf-8")

    with pytest.raises(HarnessError, match="cannot be read") as caught:
        await orchestrator.tasks.delete_task(task.slug)
    assert f"harness repair {task.slug}" in caught.value.fix

    assert await orchestrator.tasks.delete_task(task.slug, force=True) is None
    assert await orchestrator.tasks.damaged_tasks() == []


class _FirstSaveHeld(FileTaskStore):
    """A task store whose first dispatch save waits until the test lets it finish."""

    def __init__(self, tasks_dir: Path) -> None:
        super().__init__(tasks_dir)
        self.first_save_began = asyncio.Event()
        self.let_first_save_finish = asyncio.Event()

    async def save_dispatch(self, slug: str, record: DispatchRecord) -> Task:
        if not self.first_save_began.is_set() and record.progress is not None:
            self.first_save_began.set()
            await asyncio.wait_for(self.let_first_save_finish.wait(), 5)
        return await super().save_dispatch(slug, record)


@pytest.mark.waits
async def test_a_slow_progress_write_never_overwrites_a_newer_report(project: Project) -> None:
    store = _FirstSaveHeld(project.config.tasks_dir)
    runtime = HeldRuntime()
    workspaces = Workspaces(project.config.workspaces)
    host = AgentHost(runtime, workspaces)
    orchestrator = Orchestrator(
        project.config, project.roles, store, host, workspaces=workspaces, tools=HarnessTools
    )
    handle = await orchestrator.draft("developer", "two reports")
    await runtime.wait_started(1)
    first = asyncio.create_task(orchestrator.report_progress(handle.agent_id, "step 1", None))
    await asyncio.wait_for(store.first_save_began.wait(), 5)
    second = asyncio.create_task(orchestrator.report_progress(handle.agent_id, "step 2", None))
    # The newer report has its turn while the older one is still being written, or waits
    # for it: either way the older write must not land last.
    await asyncio.wait({second}, timeout=0.5)
    store.let_first_save_finish.set()
    await asyncio.gather(first, second)
    record = await orchestrator.record(handle.agent_id)
    assert record.progress is not None and record.progress.message == "step 2"
    runtime.release()
    final = await orchestrator.wait(handle.agent_id, 5)
    assert final.progress is not None and final.progress.message == "step 2"
    await orchestrator.shutdown()


async def test_three_dispatches_finishing_together_keep_three_records(
    held: tuple[Orchestrator, HeldRuntime],
) -> None:
    # The records are the orchestrator's and the store's: held agents let go at once finish
    # together (a run's record through the real CLI: tests/harness/agents/test_runs.py).
    orchestrator, runtime = held
    task = await orchestrator.tasks.create_task("three at once")
    # Reviewers only read, so three run in one task at once (writers would take turns).
    handles = [
        await orchestrator.draft("reviewer", f"part {n} of 3", task_slug=task.slug)
        for n in (1, 2, 3)
    ]
    await runtime.wait_started(3)
    runtime.release()
    records = await asyncio.gather(*(orchestrator.wait(h.agent_id, 60) for h in handles))

    assert [r.status for r in records] == ["completed"] * 3
    stored = (await orchestrator.tasks.task(task.slug)).dispatches
    assert sorted(d.agent_id for d in stored) == sorted(h.agent_id for h in handles)
    assert all(d.status == "completed" and d.result for d in stored)
