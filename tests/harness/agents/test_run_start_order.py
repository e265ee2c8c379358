"""An agent's prompt does not wait for its record to say ``running``: the record written
before its run began (``queued``, with this run's id) is what a crash leaves, and the next
start marks it interrupted and kills what the run left running. The real Claude Code CLI on
a spare, in its sandbox, against the scripted model."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

from harness.agents.events import AgentEvent
from harness.project import Project, build_orchestrator
from harness.runtime.claude import ClaudeRuntime
from harness.runtime.host import AgentHost
from harness.runtime.orphans import RUN_ID_ENV
from harness.tasks.model import DispatchRecord, Task
from harness.tasks.store import FileTaskStore
from harness.testing.processes import claude_children
from harness.testing.scripted_model import ModelRequest, ScriptedModel, Turn
from harness.workspaces.manager import Workspaces
from tests.faults.runs import environ_of, run_holder, stored_dispatches, wait_gone

pytestmark = [pytest.mark.anyio, pytest.mark.slow]


def finish(request: ModelRequest) -> Turn:
    return Turn.finish("done")


@pytest.mark.subprocess
async def test_a_spares_prompt_is_sent_while_its_running_record_is_still_being_written(
    project: Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A slow disk at the one write that no longer holds the prompt back.
    held = asyncio.Event()
    original: Callable[[FileTaskStore, str, DispatchRecord], Awaitable[Task]]
    original = FileTaskStore.save_dispatch

    async def slow_running(self: FileTaskStore, slug: str, record: DispatchRecord) -> Task:
        if record.status == "running":
            await held.wait()
        return await original(self, slug, record)

    monkeypatch.setattr(FileTaskStore, "save_dispatch", slow_running)
    config = dataclasses.replace(project.config, spares={"developer": 1}, follow_up_spares=0)
    events: list[str] = []
    async with ScriptedModel(finish) as model:
        host = AgentHost(ClaudeRuntime(base_env=model.env()), Workspaces(config.workspaces))
        orchestrator = build_orchestrator(dataclasses.replace(project, config=config), host)
        orchestrator.subscribe(lambda event: events.append(event.kind) if _ours(event) else None)
        try:
            await orchestrator.keep_warm()
            assert host.spares is not None
            await host.spares.wait_ready(1, 120)
            handle = await orchestrator.draft("developer", "write the notes")

            await model.wait_for_request(timeout=30)  # its agent was given the prompt

            # What a crash now leaves: its record, queued, naming the run its CLI carries.
            [stored] = stored_dispatches(config.tasks_dir)
            assert (stored["agentId"], stored["status"]) == (handle.agent_id, "queued")
            # Its CLI, and the spare replacing the one it took if that started already.
            clis = claude_children()
            assert clis and all(environ_of(cli)[RUN_ID_ENV] == stored["runId"] for cli in clis)
            assert host.spares.served == 1
            assert "started" not in events

            held.set()
            record = await orchestrator.wait(handle.agent_id, 60)
        finally:
            held.set()
            await orchestrator.shutdown()

    assert record is not None and record.status == "completed", record
    # Told in order, and the record never went back to an earlier state.
    assert events == ["queued", "started", "finished"]
    assert [d["status"] for d in stored_dispatches(config.tasks_dir)] == ["completed"]


def _ours(event: AgentEvent) -> bool:
    return event.kind in ("queued", "started", "finished")


@pytest.mark.subprocess
async def test_a_queued_dispatch_of_a_run_that_died_is_marked_interrupted_and_its_cli_killed(
    project: Project,
) -> None:
    tasks_dir = project.config.tasks_dir
    store = FileTaskStore(tasks_dir)
    task = await store.create("crashed just after its prompt was sent")
    with run_holder(tasks_dir) as dead:  # its child: the CLI given the prompt
        await store.save_dispatch(
            task.slug,
            DispatchRecord(
                agent_id="a0000000001",
                role="developer",
                cwd=str(Path.cwd()),
                model=None,
                started_at="2026-01-01T00:00:00Z",
                status="queued",
                journal_file="journals/a0000000001.jsonl",
                run_id=dead.run_id,
            ),
        )
        dead.process.kill()
        dead.process.wait(timeout=10)

        orchestrator = build_orchestrator(project)
        try:
            marked = await orchestrator.recover_interrupted()
        finally:
            await orchestrator.shutdown()

        wait_gone(dead.child)
    await store.close()
    assert [(slug, r.agent_id) for slug, r in marked] == [(task.slug, "a0000000001")]
    [record] = (await FileTaskStore(tasks_dir).get(task.slug)).dispatches
    assert record.status == "interrupted"
    assert record.error is not None and dead.run_id in record.error
