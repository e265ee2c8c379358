"""No agent process outlives its harness: a SIGKILL of the harness takes its ``claude``
children along (parent-death signal), and what a dead run left running anyway (the CLI's own
children) is killed at the next start, found by the ``HARNESS_RUN_ID`` in its environment."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.project import Project, build_orchestrator
from harness.runtime.orphans import (
    RUN_ID_ENV,
    forget_launcher,
    guarded_cli,
    launcher_script,
    processes_of_runs,
    run_id_in_environ,
    write_launcher,
)
from harness.tasks.run_lock import RUNS_FOLDER, run_alive
from harness.tasks.store import FileTaskStore
from harness.testing import spawn
from harness.testing.processes import claude_children
from harness.testing.scripted_model import ModelRequest, ScriptedModel, Turn
from tests.faults.runs import (
    environ_of,
    gone,
    open_files,
    run_holder,
    stored_dispatches,
    wait_gone,
    wait_until,
)

pytestmark = pytest.mark.anyio

RUN = "0123456789abcdef"


# ------------------------------------------------------------------ reading environments


@pytest.mark.parametrize(
    ("environ", "expected"),
    [
        (b"PATH=/bin\0HARNESS_RUN_ID=0123456789abcdef\0HOME=/root\0", RUN),
        (b"HARNESS_RUN_ID=0123456789abcdef", RUN),  # no trailing NUL
        (b"PATH=/bin\0HOME=/root\0", None),
        (b"", None),  # a zombie, or a kernel thread
        (b"HARNESS_RUN_ID=\0", None),
        (b"HARNESS_RUN_ID=../../etc\0", None),  # never a file name outside .runs
        (b"HARNESS_RUN_ID=0123456789ABCDEF\0", None),
        (b"HARNESS_RUN_ID=0123456789abcdef; rm -rf /\0", None),
        (b"HARNESS_RUN_ID=\xff\xfe\0", None),
        (b"MY_HARNESS_RUN_ID=0123456789abcdef\0", None),  # another variable's name ends so
        (b"X=HARNESS_RUN_ID=0123456789abcdef\0", None),  # in another variable's value
        (b"HARNESS_RUN_ID=aaaaaaaaaaaaaaaa\0HARNESS_RUN_ID=0123456789abcdef\0", "a" * 16),
    ],
)
def test_the_run_id_in_an_environ(environ: bytes, expected: str | None) -> None:
    assert run_id_in_environ(environ) == expected


def test_the_setpriv_launcher_execs_the_cli_under_a_parent_death_signal() -> None:
    text = launcher_script("/opt/my tools/claude", setpriv="/usr/bin/setpriv", python="/py")

    assert text.startswith("#!/bin/sh\n")
    assert text.endswith(
        "exec /usr/bin/setpriv --pdeathsig KILL -- '/opt/my tools/claude' \"$@\"\n"
    )


def test_the_python_launcher_arms_the_signal_then_execs_the_cli() -> None:
    text = launcher_script("/opt/claude", setpriv=None, python="/venv/bin/python")

    assert text.startswith("#!/venv/bin/python -IS\n")
    assert "prctl(PR_SET_PDEATHSIG, SIGKILL" in text
    assert "cli = '/opt/claude'" in text
    compile(text, "launcher", "exec")


# ------------------------------------------------------------------ the launcher, for real

# A stand-in for the harness: starts argv[1:] as its child, prints the child's pid, waits.
PARENT = """
import subprocess, sys
child = subprocess.Popen(sys.argv[1:], stdout=subprocess.DEVNULL)
print(child.pid, flush=True)
child.wait()
"""


@pytest.mark.parametrize("kind", ["setpriv", "python"])
def test_a_cli_started_through_the_launcher_dies_with_its_parent(tmp_path: Path, kind: str) -> None:
    setpriv = "/usr/bin/setpriv" if kind == "setpriv" else None
    launcher = write_launcher("/bin/sleep", tmp_path / "cache", setpriv=setpriv)
    assert write_launcher("/bin/sleep", tmp_path / "cache", setpriv=setpriv) == launcher
    parent = subprocess.Popen(
        [sys.executable, "-c", PARENT, str(launcher), "300"], stdout=subprocess.PIPE, text=True
    )
    try:
        assert parent.stdout is not None
        child = int(parent.stdout.readline())
        # Through the launcher's exec()s to the CLI itself, the same process all along.
        wait_until(lambda: Path(f"/proc/{child}/comm").read_text().strip() == "sleep")
    finally:
        parent.kill()
        parent.communicate(timeout=10)

    wait_gone(child)


# ------------------------------------------------------------------ leftovers of dead runs


def leftover(run_id: str) -> subprocess.Popen[bytes]:
    """A process carrying a run id, as a tool command an agent started would."""
    return subprocess.Popen(["sleep", "300"], env={**os.environ, RUN_ID_ENV: run_id})


@pytest.mark.subprocess
async def test_what_a_dead_run_left_running_is_killed_at_the_next_start(
    project: Project,
) -> None:
    tasks_dir = project.config.tasks_dir
    unknown = leftover(RUN)  # a run this tasks folder never had (another harness's)
    try:
        with run_holder(tasks_dir) as dead, run_holder(tasks_dir) as live:
            dead.process.kill()  # its child lives on, reparented: an orphan
            dead.process.wait(timeout=10)
            assert not gone(dead.child)
            assert processes_of_runs({dead.run_id}) == {dead.run_id: [dead.child]}

            orchestrator = build_orchestrator(project)
            try:
                await orchestrator.recover_interrupted()
            finally:
                await orchestrator.shutdown()

            wait_gone(dead.child)
            assert not gone(live.child)  # a live run's processes are left alone
            assert unknown.poll() is None
            # Cleaned up after, the dead run is forgotten.
            store = FileTaskStore(tasks_dir)
            assert dead.run_id not in await store.ended_runs()
            await store.close()
            assert not (tasks_dir / RUNS_FOLDER / f"{dead.run_id}.lock").exists()
    finally:
        unknown.kill()
        unknown.wait(timeout=10)


# ------------------------------------------------------------------ the real CLI


def script(request: ModelRequest) -> Turn:
    return Turn(stall_seconds=60)  # the agent's turn hangs: it is mid-request when killed


@pytest.fixture(scope="module")
def model() -> Iterator[ScriptedModel]:
    with ScriptedModel.in_thread(script) as served:
        yield served


@pytest.mark.slow
def test_a_sigkill_of_the_harness_takes_its_claude_child_along(
    project_dir: Path, model: ScriptedModel
) -> None:
    tasks_dir = project_dir / ".agents" / "tasks"
    before = len(model.requests)
    harness = spawn.Popen(
        [sys.executable, "-m", "harness", "run", "--role", "developer", "a hanging job"],
        cwd=project_dir,
        env={**os.environ, **model.env()},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        model.wait_for_request_sync(after=before, timeout=30)
        [claude] = claude_children(harness.pid)
        [dispatch] = stored_dispatches(tasks_dir)
        run_id = dispatch["runId"]
        assert environ_of(claude)[RUN_ID_ENV] == run_id
        # The run's lock is the harness's alone: its child holds no descriptor of it.
        lock = str(tasks_dir / RUNS_FOLDER / f"{run_id}.lock")
        assert lock in open_files(harness.pid)
        assert lock not in open_files(claude)

        harness.send_signal(signal.SIGKILL)
        harness.wait(timeout=10)
    finally:
        harness.kill()
        harness.wait(timeout=10)

    wait_gone(claude)
    assert not run_alive(tasks_dir / RUNS_FOLDER, run_id)
    # Not ended on disk: the next start marks it interrupted (test_liveness.py). "queued" when
    # the kill came before its running record, written while the prompt goes, was stored.
    assert [d["status"] for d in stored_dispatches(tasks_dir)] in (["running"], ["queued"])


def test_a_launcher_removed_while_the_harness_runs_is_written_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A cleaner removes it: the next agent's start must not fail with "Claude Code not
    # found" for the rest of the harness's life. A virtualenv of this test's own: the
    # launcher goes in the environment the harness runs from.
    (tmp_path / "venv").mkdir()
    monkeypatch.setattr(sys, "prefix", str(tmp_path / "venv"))
    forget_launcher()
    first = guarded_cli()
    assert first is not None and os.access(first, os.X_OK)
    Path(first).unlink()

    again = guarded_cli()

    assert again == first and os.access(again, os.X_OK)
    assert Path(first).parent == tmp_path / "venv" / "var" / "harness"
    forget_launcher()  # not this test's folder for the tests after
