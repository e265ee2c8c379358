"""Which tasks may be deleted, and how deleting them is reported: ``harness rm SLUG`` and the
retention setting ``pruneTasksAfterDays`` (applied by ``harness prune-tasks``). Pure; the
task store does the deleting (``TaskStore.delete``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from harness.errors import HarnessError
from harness.tasks.context import task_branch
from harness.tasks.model import FINAL_STATUSES, DispatchRecord, Task, task_status

# What is lost with a task, as rm and prune-tasks say it.
TASK_FILES = "task.json, journals, diffs and audit log"


def busy_error(slug: str, busy: Sequence[DispatchRecord]) -> HarnessError:
    """The refusal to delete a task some agent still works on."""
    agents = ", ".join(f"{d.role} {d.agent_id} ({d.status})" for d in busy)
    return HarnessError(
        f"task {slug!r} has agents at work: {agents}",
        fix="wait for them to end (or kill them: `/harness kill <agentId>` in Slack), or "
        "pass --force to delete the task under them",
    )


def damaged_error(slug: str) -> HarnessError:
    return HarnessError(
        f"task {slug!r} cannot be read, so whether an agent still works on it is unknown",
        fix=f"run `harness repair {slug}` first, or pass --force to delete it as it is",
    )


def last_activity(task: Task) -> datetime | None:
    """When anything last happened on the task: created, an agent started or ended, a
    decision was logged. None when none of its times can be read."""
    times = [task.created, *(d.at for d in task.decisions)]
    for record in task.dispatches:
        times += [record.started_at, record.completed_at or ""]
    parsed = [moment for text in times if (moment := _parse(text)) is not None]
    return max(parsed, default=None)


def _parse(text: str) -> datetime | None:
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        return None
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


@dataclass(frozen=True)
class Kept:
    slug: str
    reason: str


@dataclass(frozen=True)
class PrunePlan:
    """What ``prune-tasks`` deletes (tasks idle longer than ``older_than``) and what it keeps
    that it otherwise would (with why); recent tasks are neither."""

    older_than: timedelta
    delete: tuple[Task, ...]
    kept: tuple[Kept, ...] = ()


def plan_prune(tasks: Sequence[Task], *, now: datetime, older_than: timedelta) -> PrunePlan:
    """The tasks idle longer than ``older_than`` at ``now``; one an agent is queued or running
    on is kept, whatever its age, and so is one whose dates cannot be read."""
    delete: list[Task] = []
    kept: list[Kept] = []
    for task in tasks:
        active = last_activity(task)
        if active is None:
            kept.append(Kept(task.slug, "its dates cannot be read"))
        elif now - active <= older_than:
            continue
        elif any(d.status not in FINAL_STATUSES for d in task.dispatches):
            kept.append(Kept(task.slug, f"an agent is {task_status(task.dispatches)} on it"))
        else:
            delete.append(task)
    return PrunePlan(older_than, tuple(delete), tuple(kept))


def _days(span: timedelta) -> str:
    days = span / timedelta(days=1)
    return f"{days:g} day{'' if days == 1 else 's'}"


def render_plan(plan: PrunePlan, *, now: datetime) -> str:
    """The tasks ``prune-tasks`` is about to delete, each with how long it has been idle."""
    if not plan.delete:
        lines = [f"No task has been idle for more than {_days(plan.older_than)}."]
    else:
        lines = [f"Tasks idle for more than {_days(plan.older_than)} ({len(plan.delete)}):"]
        for task in plan.delete:
            active = last_activity(task)
            idle = f"idle {(now - active).days} d" if active else "idle"
            lines.append(f"  {task.slug}  {idle}  {' '.join(task.description.split())[:60]}")
    lines += [f"  kept {kept.slug}: {kept.reason}" for kept in plan.kept]
    return "\n".join(lines)


def render_removed(slug: str, task: Task | None, *, workspace: Path | None) -> str:
    """What ``rm`` deleted, and what it left: the task's workspace and branch."""
    count = f" and its {len(task.dispatches)} dispatch(es)" if task and task.dispatches else ""
    lines = [f"Deleted task {slug}{count}: {TASK_FILES}."]
    lines += kept_workspace(slug, task, workspace)
    return "\n".join(lines)


def kept_workspace(slug: str, task: Task | None, workspace: Path | None) -> list[str]:
    """What deleting a task leaves: its workspace folder and git branch, if it had them."""
    branch = task_branch(task) if task else None
    if workspace is not None:
        on = f" (branch {branch})" if branch else ""
        return [
            f"Not deleted: its workspace {workspace}{on}. `harness workspaces prune` removes "
            "it once idle (saving uncommitted work to a patch first), or delete it yourself; "
            f"a new task named {slug} would continue in it."
        ]
    if branch is not None:
        return [
            f"Not deleted: its branch {branch} (`git branch -D {branch}` in its repository "
            f"deletes it); a new task named {slug} would continue on it."
        ]
    return []
