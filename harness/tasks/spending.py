"""What each agent spent, and who pays for it: the rows the spend limits and the usage view
add up. Pure; the stores keep these rows beside their listings (the file store's index, the
NATS store's summaries) so that adding them up never reads the tasks in full.

Costs a scripted model reported (``cost_simulated``) were never paid: they make no row.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from harness.tasks.model import FINAL_STATUSES, DispatchRecord, Task


@dataclass(frozen=True)
class Spend:
    """One agent's spending: what it cost (None until it reports), or, while it lives, the
    allowance it holds; and who pays: the person who asked (else the task's requester), the
    task's channel (as Slack names it, a direct message's too), its routine, role and
    repository; ``day`` is the UTC day it started (``2026-11-28``)."""

    slug: str
    agent_id: str
    day: str
    role: str
    person: str | None = None
    channel: str | None = None
    routine: str | None = None
    repository: str | None = None
    cost_usd: float | None = None
    held_usd: float | None = None  # while it lives: its allowance, counted as spent


def utc_day(stamp: str) -> str:
    """The UTC day of a record's timestamp; ``0000-00-00`` for one that does not parse (an
    old or hand-edited record is then before every window)."""
    try:
        moment = datetime.fromisoformat(stamp)
    except ValueError:
        return "0000-00-00"
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC).strftime("%Y-%m-%d")


def spend_of(task: Task) -> tuple[Spend, ...]:
    """The rows of the task's agents that cost (or may cost) real money."""
    return tuple(_row(task, record) for record in task.dispatches if not record.cost_simulated)


def _row(task: Task, record: DispatchRecord) -> Spend:
    live = record.status not in FINAL_STATUSES
    return Spend(
        slug=task.slug,
        agent_id=record.agent_id,
        day=utc_day(record.started_at),
        role=record.role,
        person=record.requested_by or task.requester,
        channel=task.thread.channel if task.thread else None,
        routine=task.trigger.routine if task.trigger else None,
        repository=task.repository,
        cost_usd=record.cost_usd,
        held_usd=record.budget_usd if live else None,
    )


def spending_since(tasks: list[Task], since: str) -> list[Spend]:
    """Every row of ``tasks`` whose agent started on or after the UTC day ``since``."""
    return [row for task in tasks for row in spend_of(task) if row.day >= since]
