"""Crash recovery at start-up: dispatches that a stopped harness left queued or running, and
the processes it left behind.

Whether the harness process that ran a dispatch is still there is decided by its *run*
(``DispatchRecord.run_id``): the process holds the run's lock for as long as it lives
(``harness/tasks/run_lock.py``), so neither a harness that is pid 1 of its container again after a
restart nor a reused pid can pass for it. Records written before run ids existed fall back to
their ``host_pid``.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import os
from collections.abc import Awaitable, Callable, Collection

from harness.errors import HarnessError
from harness.runtime.orphans import RUN_ID_ENV, kill_processes_of_run, processes_of_runs
from harness.tasks.model import FINAL_STATUSES, DispatchRecord
from harness.tasks.store import RunLiveness, Store

logger = logging.getLogger(__name__)


StillRunning = Callable[[str, DispatchRecord], Awaitable[bool]]
Keep = Callable[[str, DispatchRecord], Awaitable[None]]
Late = Callable[[str, DispatchRecord], Awaitable[None]]

# Under the tasks folder: the kills a harness owes its workers and the outcomes it awaits from
# them (``harness/runtime/aftercare.py``), taken up by the next start.
AFTERCARE_FOLDER = ".aftercare"
LATE_NOTE = "; should its result come in after all, it takes this notice's place"


async def recover_interrupted(
    store: Store,
    now: str,
    *,
    still_running: StillRunning | None = None,
    finished: Collection[str] = (),
    keep: Keep | None = None,
    late: Late | None = None,
) -> list[tuple[str, DispatchRecord]]:
    """Mark the dispatches whose harness process is gone as ``interrupted`` and kill what
    ended runs left running; (task slug, record as marked) of each dispatch marked. Each is
    taken up by one process of those sharing the store (``take_up``), the others leave it. A
    dispatch ``still_running`` says is alive elsewhere (an agent on a worker, taken over by
    this process) is left as it is, and so is one whose agent ``finished`` (its final record
    is pending: kept, and tried again until the store takes it). A record the store refuses
    now (a full disk) goes to ``keep`` (the pending finals) rather than stop the start. A
    running one marked goes to ``late`` when given (its worker, out of reach now, may still
    end it: its outcome then takes the interruption's place)."""
    marked: list[tuple[str, DispatchRecord]] = []
    for slug, d in await store.unfinished():
        if d.agent_id in finished:
            continue
        if await host_alive(store, d):
            continue
        if d.run_id is not None and not await store.take_up(d.run_id, d.agent_id):
            continue  # another live process took it up (a replica taking over, a restart)
        if d.run_id is not None and not await _still_left(store, d):
            continue  # settled by another process since it was listed
        if still_running is not None and await still_running(slug, d):
            continue
        may_end_late = late is not None and d.status == "running"
        why = _why(d) + (LATE_NOTE if may_end_late else "")
        record = dataclasses.replace(d, status="interrupted", completed_at=now, error=why)
        try:
            await store.save_dispatch(slug, record)
        except (OSError, HarnessError) as exc:
            if keep is None:
                raise
            logger.warning("agent %s marked interrupted, kept until it can be stored: %s",
                           d.agent_id, exc)  # fmt: skip
            await keep(slug, record)
        if late is not None and may_end_late:
            await late(slug, record)
        marked.append((slug, record))
    if marked:
        logger.warning("marked %d dispatch(es) of a stopped harness interrupted", len(marked))
    await kill_leftovers(store)
    return marked


async def kill_leftovers(store: RunLiveness) -> list[int]:
    """SIGKILL every process (of this user) that an ended run of ``store`` left behind: the
    processes whose environment carries that run's ``HARNESS_RUN_ID`` (an agent's CLI, the
    commands it ran). Then the ended runs are forgotten. The pids killed."""
    # A run named in this process's own environment started this process (a harness run by
    # an agent): its leftovers are our parents, not ours to kill.
    ended = set(await store.ended_runs()) - {os.environ.get(RUN_ID_ENV, "")}
    if not ended:
        return []
    found = await asyncio.to_thread(processes_of_runs, ended)
    killed: list[int] = []
    for run_id, pids in sorted(found.items()):
        if await store.run_alive(run_id):  # begun again since it was listed: not ended
            ended.discard(run_id)
            continue
        done = await asyncio.to_thread(kill_processes_of_run, run_id, pids)
        if done:
            logger.warning(
                "killed %d process(es) left running by the stopped harness run %s: pids %s",
                len(done),
                run_id,
                ", ".join(map(str, done)),
            )
        killed += done
    for run_id in sorted(ended):
        await store.forget_run(run_id)
    return killed


async def _still_left(store: Store, listed: DispatchRecord) -> bool:
    """Whether the dispatch is still as the stopped run left it (unfinished, its run)."""
    try:
        now = await store.record(listed.agent_id)
    except HarnessError:
        return False
    return now.status not in FINAL_STATUSES and now.run_id == listed.run_id


async def host_alive(store: RunLiveness, record: DispatchRecord) -> bool:
    """Whether the harness process that ran the dispatch still lives (its run, else pid)."""
    if record.run_id is not None:
        return await store.run_alive(record.run_id)
    return _pid_alive(record.host_pid)


def _why(record: DispatchRecord) -> str:
    if record.run_id is None:
        return (
            f"the harness process running it (pid {record.host_pid}) stopped before the agent "
            "finished; ask again to run it anew"
        )
    pid = f", pid {record.host_pid}" if record.host_pid is not None else ""
    return (
        f"the harness process running it stopped (run {record.run_id}{pid}) before the agent "
        "finished, e.g. it was killed or its machine restarted; ask again to run it anew"
    )


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
