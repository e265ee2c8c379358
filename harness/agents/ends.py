"""How a dispatch record ends (pure): the outcome of the run, and where the agent's work is.
The orchestrator does the I/O (the workspace report, the diff kept in the task folder)."""

from __future__ import annotations

import dataclasses
import logging

from harness.runtime.spec import RunOutcome
from harness.tasks.model import DispatchRecord, DispatchStatus, Progress
from harness.workspaces.manager import WorkReport

logger = logging.getLogger(__name__)


def final_record(
    record: DispatchRecord,
    outcome: RunOutcome | None,
    *,
    progress: Progress | None,
    interrupted: bool,
    kill_reason: str | None,
    at: str,
) -> DispatchRecord:
    """The record once its run ended (at ``at``); ``outcome`` None means it was cancelled from
    outside.
    A kill by a shutdown (``interrupted``) ends it ``interrupted``, not ``killed``."""
    if outcome is None:
        outcome = RunOutcome(status="killed", error=kill_reason or "cancelled")
    status: DispatchStatus = outcome.status
    if interrupted and outcome.status == "killed":
        status = "interrupted"
    return dataclasses.replace(
        record,
        status=status,
        progress=progress,
        completed_at=at,
        # A branch is named only where its host read the work (``with_work``): a run that
        # never reached its worktree (its repository gone, say) claims none.
        branch=record.branch if outcome.work is not None else None,
        result=outcome.result,
        error=outcome.error,
        last_text=outcome.last_text,
        cost_usd=outcome.cost_usd,
        turns=outcome.turns,
        duration_ms=outcome.duration_ms,
    )


def with_work(record: DispatchRecord, work: WorkReport, diff_file: str | None) -> DispatchRecord:
    """The record with where the agent's work is (``diff_file``: where its diff is kept)."""
    return dataclasses.replace(
        record,
        branch=work.branch,
        head_commit=work.head_commit,
        diff_stat=work.diff_stat,
        diff_file=diff_file,
    )


def log_finish(record: DispatchRecord, slug: str) -> None:
    seconds = (record.duration_ms or 0) / 1000
    cost = ""
    if record.cost_usd is not None:
        cost = f", ${record.cost_usd:.4f}" + (" (simulated)" if record.cost_simulated else "")
    logger.info(
        "agent %s (%s) on task %s: %s in %.1f s%s",
        record.agent_id,
        record.role,
        slug,
        record.status,
        seconds,
        cost,
    )
