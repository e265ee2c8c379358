"""No part of a sandbox outlives its run: the bubblewrap a run's launcher started is the
harness's child, and ``--die-with-parent`` takes it along when the harness ends; but the
*inner* bubblewrap (the sandbox's pid 1, which the outer one clones) arms its own
parent-death signal only after the clone. Killed in between (a run killed at its start, a
spare closed while starting), the outer one leaves the inner one running with the init
process as its parent, and the sandbox with it.

So when a run's sandbox closes, whatever bubblewrap is still running for it is killed: found
by its command line, which names the sandbox's own folder (its egress socket, a path no
other sandbox has) and is the outer one's, cloned. Killing the sandbox's pid 1 ends every
process in its pid namespace. A harness killed itself leaves such a process to the run-id
sweep of its next start (``runtime/orphans.py``: the bubblewrap's own environment carries
the run id).

Parsing is pure (``is_sandbox_of``); scanning and killing are blocking (threads).
"""

from __future__ import annotations

import logging
import os
import signal
from pathlib import Path

logger = logging.getLogger(__name__)

_PROC = Path("/proc")


def is_sandbox_of(cmdline: bytes, bwrap: str, socket: str) -> bool:
    """Whether a ``/proc/<pid>/cmdline`` is bubblewrap's (``bwrap``) making the sandbox whose
    egress socket is ``socket`` (an argument of its own, as the launcher gives it)."""
    args = cmdline.split(b"\0")
    return bool(args) and args[0] == os.fsencode(bwrap) and os.fsencode(socket) in args[1:]


def is_dying(status: str) -> bool:
    """Whether a ``/proc/<pid>/status`` is a process already ending: a zombie, or a SIGKILL
    pending (its parent-death signal: the inner bubblewrap as its outer one exits, the usual
    end of every sandbox; not a leftover)."""
    fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
    if fields.get("State", "").strip()[:1] in ("Z", "X"):
        return True
    sigkill = 1 << (signal.SIGKILL - 1)
    return any(int(fields.get(name, "0").strip() or "0", 16) & sigkill
               for name in ("SigPnd", "ShdPnd"))  # fmt: skip


def _dying(process: Path) -> bool:
    try:
        return is_dying((process / "status").read_text(encoding="utf-8", errors="replace"))
    except (OSError, ValueError):
        return True  # gone meanwhile


def kill_left_behind(bwrap: str, socket: str, proc: Path = _PROC) -> list[int]:
    """SIGKILLs this user's processes that are bubblewrap making the sandbox of ``socket``;
    the pids killed. Blocking."""
    uid = os.getuid()
    killed: list[int] = []
    try:
        names = os.listdir(proc)
    except OSError:
        return killed
    for name in names:
        if not name.isdigit() or int(name) == os.getpid():
            continue
        try:
            if (proc / name).stat().st_uid != uid:
                continue
            cmdline = (proc / name / "cmdline").read_bytes()
        except OSError:  # gone, or not ours to read
            continue
        if not is_sandbox_of(cmdline, bwrap, socket) or _dying(proc / name):
            continue
        try:
            os.kill(int(name), signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            continue
        killed.append(int(name))
    if killed:
        logger.warning("killed %d sandbox process(es) its run left behind: %s", len(killed), killed)
    return killed
