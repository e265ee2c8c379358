"""How a pull request's checks stand, from its check runs (pure)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from harness.forge.github import CheckRun
from harness.tasks.model import ChecksState

FAILED_CONCLUSIONS = frozenset(
    {"failure", "timed_out", "cancelled", "action_required", "startup_failure", "stale"}
)


@dataclass(frozen=True)
class ChecksView:
    state: ChecksState
    failing: tuple[CheckRun, ...] = ()
    url: str | None = None  # the first failing check's page, else the first check's

    @property
    def failing_names(self) -> tuple[str, ...]:
        return tuple(run.name for run in self.failing)


def summarize(runs: Sequence[CheckRun]) -> ChecksView:
    """Failed as soon as any check failed (GitHub shows it red then); passed when every
    check completed otherwise; pending while any runs; unknown when none reported yet."""
    if not runs:
        return ChecksView("unknown")
    failing = tuple(
        run for run in runs if run.status == "completed" and run.conclusion in FAILED_CONCLUSIONS
    )
    if failing:
        return ChecksView("failed", failing, failing[0].url or None)
    if all(run.status == "completed" for run in runs):
        return ChecksView("passed", (), runs[0].url or None)
    return ChecksView("pending", (), runs[0].url or None)


def fix_prompt(number: int, url: str, failing: Sequence[tuple[CheckRun, str]]) -> str:
    """What a developer drafted to fix failed checks is asked, with each failing job's log."""
    names = ", ".join(run.name for run, _ in failing) or "some checks"
    parts = [
        f"The checks of pull request #{number} ({url}) failed: {names}. Find why from the "
        "logs below, fix the code on this branch (the task's worktree), run the same checks "
        "locally where you can, and commit. The harness pushes your commits to the pull "
        "request when you finish.",
    ]
    for run, log in failing:
        parts += ["", f"Log of `{run.name}` ({run.url}), its end:", "```", log.strip(), "```"]
    return "\n".join(parts)
