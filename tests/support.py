"""Small helpers shared by the suites."""

from __future__ import annotations

from harness.orchestrator import Orchestrator
from harness.results import Task


async def latest_task(orchestrator: Orchestrator) -> Task:
    """The newest task, in full."""
    summaries = await orchestrator.task_summaries()
    assert summaries, "no task was created"
    return await orchestrator.task(summaries[0].slug)
