"""``harness tasks``: the listing, read straight from the task store.

A listing runs no agent, so it opens no orchestrator: no runtime, hosting, workspaces or
forge is loaded (over 10,000 tasks about half a CPU-second, half of it Python starting and
reading config.yaml, where opening the harness took twice that). What it shows is what
``TaskDesk.task_summaries`` and ``damaged_tasks`` say (the store's summaries, with the final
records still pending in the spool read as the store will say once they are in), filtered by
the one rule of who sees a task."""

from __future__ import annotations

import os
from collections.abc import Collection, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from harness.agents.authority import Authority
from harness.agents.visibility import OPERATOR, visible
from harness.cli.render import render_task_list, render_task_list_json
from harness.tasks.common import PENDING_FOLDER, DamagedTask
from harness.tasks.model import TaskSummary

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


def list_folder_now(tasks_dir: Path, admins: Collection[str], *, as_json: bool) -> str | None:
    """``list_folder`` (no routine) read in this thread, with no event loop: asyncio, the
    store's writers and the spool's reader stay unloaded (over 10,000 tasks about a sixth of
    the command). None when the spool of pending final records holds anything: only
    ``list_folder`` reads it."""
    from harness.tasks.lookups import read_listing

    if _spooled(tasks_dir / PENDING_FOLDER):
        return None
    return _shown(*read_listing(tasks_dir), admins, as_json=as_json)


def _spooled(folder: Path) -> bool:
    try:
        with os.scandir(folder) as entries:
            return next(entries, None) is not None
    except FileNotFoundError:
        return False
    except OSError:
        return True  # whatever is wrong there, the spool's reader says


async def list_store(
    store: FileTaskStore | NatsTaskStore,
    tasks_dir: Path,
    admins: Collection[str],
    *,
    as_json: bool,
    routine: str | None,
) -> str:
    from harness.agents.pending_finals import PendingFinals

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
    return _shown(summaries, damaged, admins, as_json=as_json)


def _shown(
    summaries: Sequence[TaskSummary],
    damaged: Sequence[DamagedTask],
    admins: Collection[str],
    *,
    as_json: bool,
) -> str:
    """The listing of what the terminal's operator sees, by the one rule of who sees a task."""
    may_decide = Authority(admins).may_decide
    tasks = visible(OPERATOR, summaries, may_decide=may_decide, member_of=None)
    return (render_task_list_json if as_json else render_task_list)(tasks, damaged)
