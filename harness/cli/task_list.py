"""``harness tasks``: the listing, read straight from the task store.

A listing runs no agent, so it opens no orchestrator: no runtime, hosting, workspaces or
forge is loaded (over 10,000 tasks about half a CPU-second, half of it Python starting and
reading config.yaml, where opening the harness took twice that). What it shows is what
``TaskDesk.task_summaries`` and ``damaged_tasks`` say (the store's summaries, with the final
records still pending in the spool read as the store will say once they are in), filtered by
the one rule of who sees a task."""

from __future__ import annotations

from collections.abc import Collection
from pathlib import Path
from typing import TYPE_CHECKING

from harness.agents.authority import Authority
from harness.agents.pending_finals import PENDING_FOLDER, PendingFinals
from harness.agents.visibility import OPERATOR, visible
from harness.cli.render import render_task_list, render_task_list_json

if TYPE_CHECKING:  # config.yaml's schema is not imported when the listing config is cached
    from harness.project import Project
    from harness.tasks.files import FileTaskStore
    from harness.tasks.nats_store import NatsTaskStore


async def list_tasks(project: Project, *, as_json: bool, routine: str | None = None) -> str:
    """What ``harness tasks`` prints: every task the terminal's operator sees (every one);
    with ``routine``, those it started (read from each task.json: only this filter pays it)."""
    from harness.project import task_store

    config = project.config
    return await list_store(
        task_store(config), config.tasks_dir, config.slack.admins, as_json=as_json, routine=routine
    )


async def list_folder(
    tasks_dir: Path, admins: Collection[str], *, as_json: bool, routine: str | None = None
) -> str:
    """``list_tasks`` over the file store in ``tasks_dir`` (config.yaml's, remembered)."""
    from harness.tasks.files import FileTaskStore

    return await list_store(
        FileTaskStore(tasks_dir), tasks_dir, admins, as_json=as_json, routine=routine
    )


async def list_store(
    store: FileTaskStore | NatsTaskStore,
    tasks_dir: Path,
    admins: Collection[str],
    *,
    as_json: bool,
    routine: str | None,
) -> str:
    pending = PendingFinals(tasks_dir / PENDING_FOLDER, store)
    try:
        stored, damaged = await store.listing()
        summaries = await pending.summaries(stored)
        if routine is not None:
            started = {
                t.slug for t in await store.list() if t.trigger and t.trigger.routine == routine
            }
            summaries, damaged = [s for s in summaries if s.slug in started], []
    finally:
        await pending.close()
        await store.close()
    may_decide = Authority(admins).may_decide
    tasks = visible(OPERATOR, summaries, may_decide=may_decide, member_of=None)
    return (render_task_list_json if as_json else render_task_list)(tasks, damaged)
