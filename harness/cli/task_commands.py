"""``harness rm SLUG`` and ``harness prune-tasks``: say what goes, confirm, delete through
the orchestrator, report. What may go is decided in ``harness/tasks/removal.py``."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import datetime, timedelta

from harness.agents.orchestrator import Orchestrator
from harness.cli.render import render_cost
from harness.errors import HarnessError
from harness.tasks.model import Task, TaskSummary
from harness.tasks.removal import TASK_FILES, plan_prune, render_plan, render_removed

Confirm = Callable[[str], Awaitable[bool]]
NOTHING_DELETED = "Nothing deleted."


def _described(task: Task | None) -> str:
    if task is None:
        return "its task.json cannot be read"
    description = " ".join(task.description.split())
    if len(description) > 60:
        description = description[:59] + "…"
    summary = TaskSummary.of(task)
    cost = render_cost(summary.cost_usd, simulated=summary.cost_simulated)
    return f'"{description}", {len(task.dispatches)} dispatch(es), {summary.status}, {cost}'


async def remove_task(
    orchestrator: Orchestrator, slug: str, *, yes: bool, force: bool, confirm: Confirm
) -> tuple[bool, str]:
    """(deleted?, what to print). Refusals (an agent at work, an unreadable task without
    ``force``, no such task) raise before anything is asked."""
    task = await orchestrator.tasks.deletable_task(slug, force=force)
    question = f"Delete task {slug} ({_described(task)}) with its {TASK_FILES}?"
    if not yes and not await confirm(question):
        return False, NOTHING_DELETED
    deleted = await orchestrator.tasks.delete_task(slug, force=force)
    workspace = orchestrator.config.workspaces.root / slug
    kept = workspace if workspace.exists() else None
    return True, render_removed(slug, deleted, workspace=kept)


def retention(days: float | None, configured: float | None) -> timedelta:
    """How idle a task must be for ``prune-tasks``: ``--days``, else config.yaml's
    ``pruneTasksAfterDays``; an error when neither says (tasks are kept forever)."""
    chosen = days if days is not None else configured
    if chosen is None:
        raise HarnessError(
            "no retention set: config.yaml's pruneTasksAfterDays is null (keep every task)",
            fix="pass --days N, or set `pruneTasksAfterDays: N` in config.yaml",
        )
    if chosen <= 0:
        raise HarnessError(f"--days {chosen:g}: must be more than 0", fix="pass --days 30, say")
    return timedelta(days=chosen)


async def prune_tasks(
    orchestrator: Orchestrator,
    days: float | None,
    *,
    yes: bool,
    dry_run: bool,
    confirm: Confirm,
    now: datetime | None = None,
) -> tuple[bool, str]:
    """(not declined?, what to print). Delete the tasks idle longer than the retention (see
    ``retention``), after saying which and confirming; ``dry_run`` only says which."""
    older_than = retention(days, orchestrator.config.prune_tasks_after_days)
    now = now or orchestrator.clock.now()
    plan = plan_prune(await orchestrator.tasks.tasks(), now=now, older_than=older_than)
    listing = render_plan(plan, now=now)
    if not plan.delete or dry_run:
        return True, listing
    print(listing, flush=True)
    count = len(plan.delete)
    if not yes and not await confirm(f"Delete these {count} task(s) with their {TASK_FILES}?"):
        return False, NOTHING_DELETED
    kept: list[str] = []
    for task in plan.delete:
        try:
            await orchestrator.tasks.delete_task(task.slug)
        except HarnessError as exc:  # gone meanwhile, or an agent started on it since
            kept.append(f"  kept {task.slug}: {exc.message}")
    head = (
        f"Deleted {count - len(kept)} task(s). Their workspaces and branches, if any, are "
        "kept: `harness workspaces list` shows them, `harness workspaces prune` removes the "
        "idle ones."
    )
    return True, "\n".join([head, *kept])
