"""A run's private sandbox folder (its egress socket and launcher, in the temp folder) and
the sweep of those whose process is gone. The run removes its own folder as it ends; a
harness killed mid-run (SIGKILL, a crash, the machine's OOM killer) cannot, so each process
sweeps, once, the folders of processes no longer running before its first sandbox.

A run's egress proxy listens on the folder's ``egress.sock`` for the run's whole life: a
folder whose socket listens is kept, one whose socket has refused connections for a minute
is a run that ended (the minute covers the instant between the proxy's bind and its
listen). Otherwise the folder's name says whose it is (``harness-sandbox-<pid>-<random>``):
it is over once no process runs under that pid, or one that started after the folder was
made (the pid reused). The socket comes first because a pid means something in its own pid
namespace only (a harness in a container, or pid 1 of one, may share this temp folder).

Naming is pure (``owner_pid``); the sweep is blocking (run it in a thread).
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import re
import shutil
import socket
import tempfile
from pathlib import Path
from typing import Literal

from harness.clock import SYSTEM, Clock

logger = logging.getLogger(__name__)

PREFIX = "harness-sandbox-"
_OWNED = re.compile(rf"^{re.escape(PREFIX)}(\d+)-")
_PROC = Path("/proc")
# A folder made within this many seconds before its pid's process started is still that
# process's (clock ticks round the start time).
_START_SLACK_SECONDS = 2.0
# A socket that refuses for this long after its folder was last changed is no run's.
_BIND_GRACE_SECONDS = 60.0


def folder_prefix(pid: int) -> str:
    """``mkdtemp``'s prefix for a sandbox folder of the process ``pid``."""
    return f"{PREFIX}{pid}-"


def owner_pid(name: str) -> int | None:
    """The pid a sandbox folder's name carries; None for an older harness's folder."""
    matched = _OWNED.match(name)
    return int(matched.group(1)) if matched else None


def make_folder() -> str:
    """A new private folder for one run's sandbox, named for this process. Blocking."""
    return tempfile.mkdtemp(prefix=folder_prefix(os.getpid()))


def _started_at(pid: int, proc: Path) -> float | None:
    """When ``pid``'s process started (seconds since the epoch); None when it is not running."""
    try:
        stat = (proc / str(pid) / "stat").read_text(encoding="utf-8", errors="replace")
        boot = next(
            float(line.split()[1])
            for line in (proc / "stat").read_text(encoding="utf-8").splitlines()
            if line.startswith("btime ")
        )
    except (OSError, StopIteration, ValueError, IndexError):
        return None
    # Field 22, counted after the command's closing parenthesis (a name may hold spaces).
    fields = stat.rsplit(")", 1)[-1].split()
    try:
        return boot + int(fields[19]) / os.sysconf("SC_CLK_TCK")
    except (IndexError, ValueError, OSError):
        return None


SocketState = Literal["listening", "refused", "absent"]


def _socket_state(sock: Path) -> SocketState:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
        try:
            probe.connect(str(sock))
        except ConnectionRefusedError:
            return "refused"
        except OSError:  # missing (the proxy not bound yet), or not a socket
            return "absent"
    return "listening"


def is_stale(folder: Path, now: float, proc: Path = _PROC) -> bool:
    """Whether a sandbox folder's run is over (``now``: seconds since the epoch). Blocking."""
    try:
        made = folder.stat().st_mtime
    except OSError:
        return False  # gone meanwhile
    state = _socket_state(folder / "egress.sock")
    if state == "listening":
        return False
    if state == "refused" and now - made > _BIND_GRACE_SECONDS:
        return True
    return _owner_gone(folder.name, made, proc)


def _owner_gone(name: str, made: float, proc: Path) -> bool:
    pid = owner_pid(name)
    if pid is None or pid == os.getpid():
        return False  # an older harness's, or ours: not known to be over
    started = _started_at(pid, proc)
    return started is None or started > made + _START_SLACK_SECONDS


def sweep_stale_folders(
    base: Path | None = None, *, clock: Clock = SYSTEM, proc: Path = _PROC
) -> list[Path]:
    """Removes this user's sandbox folders in ``base`` (the temp folder) whose run is over;
    those removed. Blocking."""
    base = base if base is not None else Path(tempfile.gettempdir())
    now = clock.now().timestamp()
    uid = os.getuid()
    removed: list[Path] = []
    with contextlib.suppress(OSError):
        for folder in base.glob(f"{PREFIX}*"):
            try:
                if folder.is_symlink() or not folder.is_dir() or folder.stat().st_uid != uid:
                    continue
            except OSError:
                continue
            if is_stale(folder, now, proc):
                shutil.rmtree(folder, ignore_errors=True)
                removed.append(folder)
    if removed:
        logger.info("removed %d sandbox folder(s) of runs that ended unclosed", len(removed))
    return removed


@functools.cache
def sweep_once() -> None:
    """The sweep, the first time a process asks for it. Blocking."""
    sweep_stale_folders()
