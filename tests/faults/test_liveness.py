"""Is the harness that ran a dispatch still there? Decided by its run's lock, not its pid: a
harness that is pid 1 of its container again after a kill, or a reused pid, must not keep a
dead dispatch ``running`` for ever."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.project import Project, build_orchestrator
from harness.tasks.store import FileTaskStore
from harness.testing.held_runtime import HeldRuntime
from harness.testing.records import make_record
from harness.testing.scripted_model import ModelRequest, ScriptedModel, Turn
from tests.faults.runs import children_of, run_holder, stored_dispatches, wait_gone

pytestmark = pytest.mark.anyio

# A new pid namespace whose first process (the harness) is pid 1, as in a container.
AS_PID_1 = ("unshare", "--user", "--pid", "--fork", "--map-root-user", "--mount-proc")
NO_SUCH_PID = 2**22 + 1  # above pid_max's default


def script(request: ModelRequest) -> Turn:
    if "slow" in request.first_user_text:
        return Turn(stall_seconds=60)
    return Turn.finish("done")


@pytest.fixture(scope="module")
def model() -> Iterator[ScriptedModel]:
    with ScriptedModel.in_thread(script) as served:
        yield served


def harness_as_pid_1(project_dir: Path, prompt: str) -> list[str]:
    return [
        *AS_PID_1,
        *(sys.executable, "-m", "harness", "run", "--role", "developer", prompt),
        *("--config", str(project_dir / "config.yaml")),
    ]


@pytest.mark.slow
def test_a_harness_killed_as_pid_1_and_started_again_as_pid_1_interrupts_the_dispatch(
    project_dir: Path, model: ScriptedModel
) -> None:
    tasks_dir = project_dir / ".agents" / "tasks"
    env = {**os.environ, **model.env()}
    before = len(model.requests)
    first = subprocess.Popen(
        harness_as_pid_1(project_dir, "a slow job"),
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        model.wait_for_request_sync(after=before, timeout=30)  # its agent is running
        [harness] = children_of(first.pid)
        ns_pids = Path(f"/proc/{harness}/status").read_text().split("NSpid:")[1].split()[:2]
        assert ns_pids == [str(harness), "1"]  # pid 1 in its own namespace
        [running] = stored_dispatches(tasks_dir)
        assert (running["status"], running["hostPid"]) == ("running", 1)

        os.kill(harness, signal.SIGKILL)
    finally:
        first.kill()
        _, err = first.communicate(timeout=10)
    assert b"Traceback" not in err, err.decode()

    second = subprocess.run(
        harness_as_pid_1(project_dir, "a quick job"),
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert second.returncode == 0, second.stderr

    by_prompt = {d["prompt"]: d for d in stored_dispatches(tasks_dir)}
    killed, quick = by_prompt["a slow job"], by_prompt["a quick job"]
    assert quick["status"] == "completed"
    assert quick["hostPid"] == 1  # the same pid as the dead one: the pid could not tell
    assert quick["runId"] != killed["runId"]
    assert killed["status"] == "interrupted"
    assert killed["completedAt"]
    assert killed["error"] == (
        f"the harness process running it stopped (run {killed['runId']}, pid 1) before the "
        "agent finished, e.g. it was killed or its machine restarted; ask again to run it anew"
    )


@pytest.mark.subprocess
async def test_a_dispatch_whose_run_ended_is_interrupted_though_its_pid_is_alive(
    project: Project,
) -> None:
    tasks_dir = project.config.tasks_dir
    with run_holder(tasks_dir) as dead, run_holder(tasks_dir) as live:
        dead.process.kill()  # SIGKILL: its lock file stays, nobody holds it
        dead.process.wait(timeout=10)
        store = FileTaskStore(tasks_dir)
        slug = (await store.create("crashed work")).slug
        # Pids that are alive (this process, pid 1) but belong to no harness run of theirs.
        await store.save_dispatch(slug, make_record("a1", host_pid=os.getpid(), run_id=dead.run_id))
        await store.save_dispatch(slug, make_record("a2", host_pid=1, run_id=dead.run_id))
        # A live run whose recorded pid means nothing here (another container's, say).
        await store.save_dispatch(slug, make_record("a3", host_pid=NO_SUCH_PID, run_id=live.run_id))

        orchestrator = build_orchestrator(project)
        try:
            assert len(await orchestrator.recover_interrupted()) == 2
        finally:
            await orchestrator.shutdown()

        statuses = {d.agent_id: d for d in (await store.get(slug)).dispatches}
        assert [statuses[a].status for a in ("a1", "a2", "a3")] == [
            "interrupted",
            "interrupted",
            "running",
        ]
        assert f"(run {dead.run_id}, pid {os.getpid()})" in (statuses["a1"].error or "")
        assert live.process.poll() is None  # nothing of the live run was touched
        assert await store.run_alive(live.run_id)
        assert not await store.run_alive(dead.run_id)
        await store.close()


@pytest.mark.subprocess
async def test_a_run_is_dead_once_its_process_is_though_its_children_live_on(
    project: Project,
) -> None:
    # The holder's child inherited every descriptor it could (close_fds=False): the run's
    # lock is close-on-exec, so the child does not keep the run alive.
    store = FileTaskStore(project.config.tasks_dir)
    try:
        with run_holder(project.config.tasks_dir) as held:
            assert await store.run_alive(held.run_id)
            held.process.kill()
            held.process.wait(timeout=10)

            assert Path(f"/proc/{held.child}").exists()
            assert not await store.run_alive(held.run_id)
            assert held.run_id in await store.ended_runs()
            os.kill(held.child, signal.SIGKILL)
            wait_gone(held.child)
    finally:
        await store.close()


async def test_records_of_earlier_versions_fall_back_to_the_pid(project: Project) -> None:
    store = FileTaskStore(project.config.tasks_dir)
    slug = (await store.create("old work")).slug
    await store.save_dispatch(slug, make_record("a1", host_pid=os.getpid()))
    await store.save_dispatch(slug, make_record("a2", host_pid=NO_SUCH_PID))

    orchestrator = build_orchestrator(project)
    try:
        assert len(await orchestrator.recover_interrupted()) == 1
    finally:
        await orchestrator.shutdown()

    a1, a2 = (await store.get(slug)).dispatches
    assert (a1.status, a2.status) == ("running", "interrupted")
    assert a2.error == (
        f"the harness process running it (pid {NO_SUCH_PID}) stopped before the agent "
        "finished; ask again to run it anew"
    )
    await store.close()


async def test_a_live_harness_keeps_its_dispatches_running_for_every_recovery(
    project: Project,
) -> None:
    held = HeldRuntime()
    orchestrator = build_orchestrator(project, held)
    other = build_orchestrator(project)  # a second harness on the same tasks (same process)
    try:
        running = asyncio.Event()  # its record says running (written as its agent starts)
        orchestrator.subscribe(lambda event: running.set() if event.kind == "started" else None)
        handle = await orchestrator.draft("developer", "long work")
        await held.wait_started(1)
        await asyncio.wait_for(running.wait(), 10)

        assert await orchestrator.recover_interrupted() == []
        assert await other.recover_interrupted() == []
        assert (await orchestrator.record(handle.agent_id)).status == "running"
    finally:
        held.release()
        await other.shutdown()
        await orchestrator.shutdown()
    assert (await orchestrator.record(handle.agent_id)).status == "completed"


@pytest.mark.subprocess
async def test_two_harnesses_recovering_at_once_take_up_each_dead_dispatch_once(
    project: Project,
) -> None:
    tasks_dir = project.config.tasks_dir
    with run_holder(tasks_dir) as dead:
        dead.process.kill()  # SIGKILL: its run ended, its dispatches left running
        dead.process.wait(timeout=10)
        store = FileTaskStore(tasks_dir)
        slug = (await store.create("crashed work")).slug
        for agent_id in ("a1", "a2", "a3"):
            await store.save_dispatch(slug, make_record(agent_id, run_id=dead.run_id))
        await store.close()

        # A restarted bot and a replica taking over its runs, say: both recover at once.
        first, second = build_orchestrator(project), build_orchestrator(project)
        try:
            marked = await asyncio.gather(first.recover_interrupted(), second.recover_interrupted())
        finally:
            await first.shutdown()
            await second.shutdown()

    agents = sorted(record.agent_id for found in marked for _, record in found)
    assert agents == ["a1", "a2", "a3"]  # each announced interrupted by one of them, once
