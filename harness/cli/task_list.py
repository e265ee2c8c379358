"""``harness tasks``: the listing, read straight from the task store.

A listing runs no agent, so it opens no orchestrator: no runtime, hosting, workspaces or
forge is loaded (over 10,000 tasks about half a CPU-second, half of it Python starting and
reading config.yaml, where opening the harness took twice that). What it shows is what
``TaskDesk.task_summaries`` and ``damaged_tasks`` say (the store's summaries, with the final
records still pending in the spool read as the store will say once they are in), filtered by
the one rule of who sees a task."""

from __future__ import annotations

from harness.agents.authority import Authority
from harness.agents.pending_finals import PENDING_FOLDER, PendingFinals
from harness.agents.visibility import OPERATOR, visible
from harness.cli.render import render_task_list, render_task_list_json
from harness.project import Project, task_store


async def list_tasks(project: Project, *, as_json: bool, routine: str | None = None) -> str:
    """What ``harness tasks`` prints: every task the terminal's operator sees (every one);
    with ``routine``, those it started (read from each task.json: only this filter pays it)."""
    config = project.config
    store = task_store(config)
    pending = PendingFinals(config.tasks_dir / PENDING_FOLDER, store)
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
    may_decide = Authority(config.slack.admins).may_decide
    tasks = visible(OPERATOR, summaries, may_decide=may_decide, member_of=None)
    return (render_task_list_json if as_json else render_task_list)(tasks, damaged)
