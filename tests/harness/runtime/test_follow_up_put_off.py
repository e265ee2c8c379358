"""A task whose agent completed while agents queued gets its follow-up spare once the load
settles, unless its next agent came first: then that agent's end asks for one again. The
real pool and folders; a runtime that records the starts it is asked for."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from harness.config.roles import Role
from harness.config.settings import WorkspaceSettings
from harness.errors import HarnessError
from harness.runtime.follow_up_spares import FollowUpSpares
from harness.runtime.spare_budget import SpareBudget
from harness.runtime.spec import AgentControl, AgentSpec, RunIO, RunOutcome, SpareLimits
from harness.testing.clock import FakeClock
from harness.workspaces.manager import Workspaces

pytestmark = pytest.mark.anyio


class Starts:
    """A warm runtime that records each spare asked of it and starts none (as a runtime
    that cannot: the pool then makes no spare)."""

    def __init__(self) -> None:
        self.asked: list[str] = []

    async def warm(self, template: AgentSpec) -> Any:
        self.asked.append(template.task_slug or "")
        raise HarnessError("no CLI in this test", fix="")

    async def run_warm(
        self, warm: Any, spec: AgentSpec, control: AgentControl, io: RunIO
    ) -> RunOutcome:
        raise AssertionError("no spare is ever made here")


def developer_of(slug: str, cwd: Path) -> AgentSpec:
    role = Role("developer", "Developer", "worker", "You write code.", "roles/developer.md")
    return AgentSpec(agent_id=f"a{slug}", role=role, prompt="", cwd=str(cwd), task_slug=slug)


async def pool(tmp_path: Path) -> tuple[FollowUpSpares, Starts, list[bool], Path]:
    """Follow-up spares (one at most) on a budget whose queue the test sets, a folder."""
    workspaces = Workspaces(WorkspaceSettings(root=tmp_path / "workspaces"))
    queued = [True]
    budget = SpareBudget(FakeClock())
    budget.set(SpareLimits(settle_seconds=0.0), lambda: queued[0])
    starts = Starts()
    spares = FollowUpSpares(starts, workspaces.sandbox_folders, workspaces.sandbox_git, budget)
    spares.limit = 1
    folder = tmp_path / "workspaces" / "t1"
    folder.mkdir(parents=True)
    return spares, starts, queued, folder


async def test_a_follow_up_spare_put_off_by_a_queue_starts_once_the_queue_is_gone(
    tmp_path: Path,
) -> None:
    spares, starts, queued, folder = await pool(tmp_path)
    try:
        spares.prepare(developer_of("t1", folder), folder)  # agents queue: put off
        spares.nudge()
        await spares.settled(5)
        assert starts.asked == []

        queued[0] = False
        spares.nudge()  # an agent's end, the queue gone
        await spares.settled(5)
    finally:
        await spares.close()

    assert starts.asked == ["t1"]


async def test_a_put_off_spare_is_not_started_once_its_tasks_next_agent_came(
    tmp_path: Path,
) -> None:
    spares, starts, queued, folder = await pool(tmp_path)
    try:
        spares.prepare(developer_of("t1", folder), folder)  # agents queue: put off
        spares.came("t1")  # the task's follow-up came while they did

        queued[0] = False
        spares.nudge()
        await spares.settled(5)
    finally:
        await spares.close()

    assert starts.asked == []
