"""How a dispatch record ends (pure): the run's outcome, a shutdown's kill, the work's place."""

from __future__ import annotations

from harness.agents.ends import final_record, with_work
from harness.runtime.spec import RunOutcome
from harness.tasks.model import Progress
from harness.testing.records import make_record
from harness.workspaces.manager import WorkReport


def test_the_outcome_fills_the_record_and_a_shutdowns_kill_is_an_interruption() -> None:
    running = make_record("a1", status="running")
    progress = Progress("half way", "2026-01-01T10:00:00Z", 50.0)
    done = RunOutcome(status="completed", cost_usd=0.5, turns=3, duration_ms=900)

    at = "2026-01-01T10:05:00.000Z"
    ended = final_record(
        running, done, progress=progress, interrupted=False, kill_reason=None, at=at
    )
    shut = final_record(running, RunOutcome(status="killed", error="bye"), progress=None,
                        interrupted=True, kill_reason="bye", at=at)  # fmt: skip
    cancelled = final_record(
        running, None, progress=None, interrupted=False, kill_reason=None, at=at
    )

    assert (ended.status, ended.cost_usd, ended.turns, ended.progress) == (
        "completed", 0.5, 3, progress,
    )  # fmt: skip
    assert ended.completed_at == at
    assert (shut.status, shut.error) == ("interrupted", "bye")
    assert (cancelled.status, cancelled.error) == ("killed", "cancelled")


def test_the_work_report_says_where_the_work_is() -> None:
    work = WorkReport(branch="harness/t", head_commit="abc", diff_stat=" a | 1 +", diff="+x")

    record = with_work(make_record("a1"), work, "diffs/a1.diff")

    assert (record.branch, record.head_commit, record.diff_stat, record.diff_file) == (
        "harness/t", "abc", " a | 1 +", "diffs/a1.diff",
    )  # fmt: skip
