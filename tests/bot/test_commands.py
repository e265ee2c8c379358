"""What /harness list shows: pure rendering over literal agent snapshots."""

from __future__ import annotations

from bot.commands import render_agent_list
from harness.agents.pool import AgentInfo


def info(agent_id: str, *, worker: str | None) -> AgentInfo:
    return AgentInfo(
        agent_id=agent_id,
        role="developer",
        task_slug="fix-it",
        cwd="/w",
        parent_id=None,
        depth=0,
        status="running",
        queued_at="2026-11-22T10:00:00Z",
        started_at="2026-11-22T10:00:01Z",
        elapsed_seconds=12.0,
        activity="using Edit",
        worker=worker,
    )


def test_the_list_names_the_worker_of_each_remote_agent() -> None:
    shown = render_agent_list([info("a1", worker="gpu-box-2"), info("a2", worker=None)], {}, [])

    remote, local = shown.splitlines()[1:]
    assert "`a1`" in remote and "on worker `gpu-box-2`" in remote
    assert "`a2`" in local and "worker" not in local
