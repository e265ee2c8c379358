"""Which sandbox folders the sweep removes: those whose egress socket has refused for a
minute, and those of a process gone (by the pid in the name); never one whose socket
listens, whatever its pid. Real folders, real Unix sockets and this machine's processes."""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from harness.sandbox.folders import folder_prefix, owner_pid, sweep_stale_folders
from harness.testing.clock import FakeClock


def gone_pid() -> int:
    """The pid of a process that has ended (and been reaped)."""
    done = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True, timeout=30)  # fmt: skip
    return int(done.stdout)


@pytest.fixture
def base() -> Iterator[Path]:
    # Short: a Unix socket's path in it must fit the address.
    folder = Path(tempfile.mkdtemp(prefix="hs-", dir="/tmp"))
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def test_the_sweep_removes_the_folders_of_ended_runs_only(base: Path) -> None:
    mine = base / f"{folder_prefix(os.getpid())}abc"
    dead = base / f"{folder_prefix(gone_pid())}def"
    # A harness of another pid namespace (pid 1 of a container sharing /tmp): its pid says
    # nothing here, its socket does.
    other_ended = base / f"{folder_prefix(1)}ghi"
    other_live = base / f"{folder_prefix(gone_pid())}jkl"
    legacy_ended = base / "harness-sandbox-x1y2z3"
    legacy_live = base / "harness-sandbox-q7r8s9"
    for folder in (mine, dead, other_ended, other_live, legacy_ended, legacy_live):
        folder.mkdir()
    made = datetime.fromtimestamp(mine.stat().st_mtime, UTC)
    with contextlib.ExitStack() as sockets:
        for folder in (other_ended, legacy_ended):  # bound, then nobody listens
            sockets.enter_context(socket.socket(socket.AF_UNIX)).bind(str(folder / "egress.sock"))
        for folder in (other_live, legacy_live):
            listening = sockets.enter_context(socket.socket(socket.AF_UNIX))
            listening.bind(str(folder / "egress.sock"))
            listening.listen(1)

        at_once = sweep_stale_folders(base, clock=FakeClock(made))
        later = sweep_stale_folders(base, clock=FakeClock(made + timedelta(minutes=2)))

    assert at_once == [dead]  # a socket that refuses: its proxy may be about to listen
    assert sorted(later) == sorted([other_ended, legacy_ended])
    assert sorted(base.iterdir()) == sorted([mine, other_live, legacy_live])


def test_a_folder_name_carries_its_process_s_pid() -> None:
    assert owner_pid(f"{folder_prefix(4242)}k3j2h1") == 4242
    assert owner_pid("harness-sandbox-k3j2h1") is None
