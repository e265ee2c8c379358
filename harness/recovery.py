"""Crash recovery: dispatches that a stopped harness left queued or running."""

from __future__ import annotations

import dataclasses
import os

from harness.tasks import TaskStore


async def recover_interrupted(store: TaskStore, now: str) -> int:
    """Mark the dispatches whose harness process is gone as ``interrupted``; their count."""
    count = 0
    for slug, d in await store.unfinished():
        if _pid_alive(d.host_pid):
            continue
        await store.save_dispatch(
            slug,
            dataclasses.replace(
                d,
                status="interrupted",
                completed_at=now,
                error=f"the harness process (pid {d.host_pid}) stopped before the agent finished",
            ),
        )
        count += 1
    return count


def _pid_alive(pid: int | None) -> bool:
    if pid is None:
        return False
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
