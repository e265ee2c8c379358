"""Requesters kept by an earlier version in the bot's own file move into task.json once."""

from __future__ import annotations

import json

import pytest

from bot.requesters import FILE_NAME, migrate_requesters
from harness.project import Project, build_orchestrator
from harness.testing.held_runtime import HeldRuntime

pytestmark = pytest.mark.anyio


async def test_an_earlier_versions_requesters_move_into_their_tasks_once(
    project: Project,
) -> None:
    orchestrator = build_orchestrator(project, HeldRuntime())
    older = await orchestrator.tasks.create_task("fix the login")
    named = await orchestrator.tasks.create_task("paint it", requester="U9")
    tasks_dir = project.config.tasks_dir
    file = tasks_dir / FILE_NAME
    users = {older.slug: "U1", named.slug: "U2", "deleted-since": "U3"}
    file.write_text(json.dumps({"version": 1, "requesters": users}), encoding="utf-8")

    assert await migrate_requesters(orchestrator.tasks, tasks_dir) == 1
    assert (await orchestrator.tasks.task(older.slug)).requester == "U1"
    assert (await orchestrator.tasks.task(named.slug)).requester == "U9"  # task.json wins
    assert not file.exists() and (tasks_dir / f"{FILE_NAME}.migrated").exists()
    assert await migrate_requesters(orchestrator.tasks, tasks_dir) == 0
    await orchestrator.shutdown()


async def test_a_torn_requesters_file_is_left_alone_and_nothing_moves(project: Project) -> None:
    orchestrator = build_orchestrator(project, HeldRuntime())
    tasks_dir = project.config.tasks_dir
    tasks_dir.mkdir(parents=True, exist_ok=True)
    (tasks_dir / FILE_NAME).write_text("{torn", encoding="utf-8")

    assert await migrate_requesters(orchestrator.tasks, tasks_dir) == 0
    assert (tasks_dir / FILE_NAME).exists()
    await orchestrator.shutdown()
