"""Helpers for the liveness and orphan tests: harness runs held by other processes, and
waiting (with a bound) for a process to be gone."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# Begins a run of the file store on argv[1], starts `sleep` as an agent would be started
# (carrying the run id, and every descriptor it may inherit but the pipes: close_fds=False), prints
# "<run id> <sleep pid>" and waits for its stdin to close.
HOLDER = """
import asyncio, os, subprocess, sys
from pathlib import Path
from harness.tasks.store import FileTaskStore

async def main():
    store = FileTaskStore(Path(sys.argv[1]))
    run_id = await store.begin_run()
    child = subprocess.Popen(
        ["sleep", "300"],
        env={**os.environ, "HARNESS_RUN_ID": run_id},
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        close_fds=False,
    )
    print(run_id, child.pid, flush=True)
    await asyncio.to_thread(sys.stdin.read)

asyncio.run(main())
"""


@dataclass(frozen=True)
class HeldRun:
    process: subprocess.Popen[str]
    run_id: str
    child: int  # the `sleep` it started, carrying the run id


@contextmanager
def run_holder(tasks_dir: Path) -> Iterator[HeldRun]:
    """Another harness process with a run on ``tasks_dir`` and one agent-like child; both are
    killed at the end."""
    process = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(tasks_dir)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    child = None
    try:
        assert process.stdout is not None
        line = process.stdout.readline()  # returns at EOF too, if the holder fails
        assert line, "the run holder exited before it began a run"
        run_id, pid = line.split()
        child = int(pid)
        yield HeldRun(process, run_id, child)
    finally:
        process.kill()
        process.communicate(timeout=10)  # reaps it and closes the pipes
        if child is not None and not gone(child):
            os.kill(child, 9)


def gone(pid: int) -> bool:
    """Whether the process has ended (a zombie nobody reaped yet counts as ended)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text("utf-8", errors="replace")
    except (FileNotFoundError, ProcessLookupError):
        return True
    return stat[stat.rindex(")") + 2] in "ZX"


def wait_gone(pid: int, timeout: float = 5.0) -> float:
    """Polls until the process is gone, at most ``timeout`` seconds; the seconds it took.
    AssertionError when it outlives the bound."""
    started = time.monotonic()
    while not gone(pid):
        if time.monotonic() - started > timeout:
            raise AssertionError(f"process {pid} still alive after {timeout} s")
        time.sleep(0.005)
    return time.monotonic() - started


def wait_until(condition: Callable[[], bool], timeout: float = 5.0) -> None:
    """Polls ``condition`` until it holds, at most ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"not so within {timeout} s")
        time.sleep(0.005)


def children_of(pid: int) -> list[int]:
    """The direct children of a process (Linux ``/proc/<pid>/task/*/children``)."""
    found: list[int] = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            found += [int(p) for p in (task / "children").read_text().split()]
        except OSError:
            continue
    return found


def environ_of(pid: int) -> dict[str, str]:
    raw = Path(f"/proc/{pid}/environ").read_bytes()
    pairs = (entry.split(b"=", 1) for entry in raw.split(b"\0") if b"=" in entry)
    return {k.decode(errors="replace"): v.decode(errors="replace") for k, v in pairs}


def open_files(pid: int) -> list[str]:
    """Where the process's descriptors point."""
    files: list[str] = []
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            files.append(os.readlink(fd))
        except OSError:
            continue
    return files


def stored_dispatches(tasks_dir: Path) -> list[dict[str, Any]]:
    """Every dispatch in every task.json under ``tasks_dir``, as stored."""
    return [
        dispatch
        for task_json in sorted(tasks_dir.glob("*/task.json"))
        for dispatch in json.loads(task_json.read_text("utf-8"))["dispatches"]
    ]
