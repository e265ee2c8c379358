"""No agent process outlives its harness: the ``claude`` children die with the harness process,
and whatever a stopped run left running is killed at the next start.

Two guards, because neither is enough alone:

- **Parent-death signal.** The runtime starts the Claude Code CLI through a tiny *launcher*
  (``guarded_cli()``) that asks the kernel to SIGKILL the CLI when its parent, the harness,
  dies, then execs the real bundled CLI: ``setpriv --pdeathsig KILL`` in a two-line sh
  script, or a Python launcher calling ``prctl(PR_SET_PDEATHSIG)`` where ``setpriv`` is
  missing. Linux only; elsewhere the plain CLI runs. (The signal fires when the *thread* that
  started the child ends: the runtime starts children from the event loop's thread, which
  lives as long as the harness.)
- **Run ids in the environment.** Every agent's environment carries ``HARNESS_RUN_ID``, which
  the CLI's own children inherit (tool commands, MCP servers), out of the parent-death
  signal's reach. At start, the harness reads ``/proc/*/environ`` of its user's processes and
  SIGKILLs those whose run is an *ended* run of its task store (see ``harness/tasks/run_lock.py``).

Parsing is pure (``run_id_in_environ``); scanning, killing and writing the launcher are
blocking and run in threads.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import importlib.util
import logging
import os
import shlex
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
from collections.abc import Collection
from pathlib import Path

from harness.atomic import write_atomic
from harness.tasks.run_lock import is_run_id

logger = logging.getLogger(__name__)

RUN_ID_ENV = "HARNESS_RUN_ID"
_PREFIX = RUN_ID_ENV.encode("ascii") + b"="
_PROC = Path("/proc")


# ------------------------------------------------------------------ leftover processes


def run_id_in_environ(environ: bytes) -> str | None:
    """The run id in a ``/proc/<pid>/environ`` (NUL-separated ``NAME=value``); None when there
    is none or it is not a well-formed run id (nothing the harness set)."""
    for entry in environ.split(b"\0"):
        if entry.startswith(_PREFIX):
            value = entry[len(_PREFIX) :].decode("ascii", "replace")
            return value if is_run_id(value) else None
    return None


def processes_of_runs(run_ids: Collection[str], proc: Path = _PROC) -> dict[str, list[int]]:
    """{run id: pids} of this user's processes (this one excepted) whose environment names one
    of ``run_ids``. Blocking: reads ``/proc``; empty where there is none."""
    found: dict[str, list[int]] = {}
    if not run_ids:
        return found
    for pid in _user_pids(proc):
        run_id = _run_of(proc, pid)
        if run_id is not None and run_id in run_ids:
            found.setdefault(run_id, []).append(pid)
    return found


def kill_processes_of_run(run_id: str, pids: Collection[int], proc: Path = _PROC) -> list[int]:
    """SIGKILL each of ``pids`` that still carries ``run_id``; the pids killed. Blocking.

    Each process is pinned first (a pidfd), then its environment read again, so a pid that was
    reused since the scan is never hit."""
    killed: list[int] = []
    for pid in pids:
        pidfd: int | None = None
        try:
            pidfd = os.pidfd_open(pid)
        except ProcessLookupError:
            continue
        except OSError:  # no pidfds (old kernel): the re-read below is the only check
            pass
        try:
            if _run_of(proc, pid) != run_id:
                continue
            if pidfd is not None:
                signal.pidfd_send_signal(pidfd, signal.SIGKILL)
            else:
                os.kill(pid, signal.SIGKILL)
            killed.append(pid)
        except ProcessLookupError:
            continue
        except PermissionError as exc:
            logger.warning("could not kill process %d left by run %s: %s", pid, run_id, exc)
        finally:
            if pidfd is not None:
                os.close(pidfd)
    return killed


def _user_pids(proc: Path) -> list[int]:
    own, uid = os.getpid(), os.getuid()
    try:
        names = [entry.name for entry in os.scandir(proc) if entry.name.isdigit()]
    except OSError:
        return []  # no /proc (not Linux)
    pids: list[int] = []
    for name in names:
        try:
            if int(name) != own and os.stat(proc / name).st_uid == uid:
                pids.append(int(name))
        except OSError:
            continue  # gone meanwhile
    return pids


def _run_of(proc: Path, pid: int) -> str | None:
    try:
        return run_id_in_environ((proc / str(pid) / "environ").read_bytes())
    except OSError:  # gone, or not ours to read
        return None


# ------------------------------------------------------------------ the launcher


def launcher_script(real_cli: str, *, setpriv: str | None, python: str) -> str:
    """The text of an executable that runs ``real_cli`` with the arguments it was given, such
    that the kernel SIGKILLs it when its parent process dies. Pure."""
    if setpriv is not None:
        return (
            "#!/bin/sh\n"
            "# Written by the harness: runs the Claude Code CLI so that it dies with the\n"
            "# harness process that started it, however that process ends.\n"
            f"exec {shlex.quote(setpriv)} --pdeathsig KILL -- {shlex.quote(real_cli)} "
            '"$@"\n'
        )
    return (
        f"#!{python} -IS\n"
        "# Written by the harness: runs the Claude Code CLI so that it dies with the\n"
        "# harness process that started it, however that process ends.\n"
        "import ctypes, os, sys\n"
        "parent = os.getppid()\n"
        "PR_SET_PDEATHSIG, SIGKILL = 1, 9\n"
        "ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0)\n"
        "if os.getppid() != parent:  # the harness died before the signal was armed\n"
        "    sys.exit(1)\n"
        f"cli = {real_cli!r}\n"
        "os.execv(cli, [cli, *sys.argv[1:]])\n"
    )


def write_launcher(real_cli: str, folder: Path, *, setpriv: str | None) -> Path:
    """The launcher for ``real_cli`` in ``folder``, written once (atomically; its name is a
    hash of its text, so another CLI or setpriv gets its own). Blocking."""
    text = launcher_script(real_cli, setpriv=setpriv, python=sys.executable)
    digest = hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]
    file = folder / f"claude-{digest}"
    data = text.encode("utf-8")
    try:
        intact = os.access(file, os.X_OK) and file.read_bytes() == data
    except OSError:
        intact = False
    if not intact:
        folder.mkdir(parents=True, exist_ok=True)
        write_atomic(file, data, mode=0o755)
    return file


def bundled_cli() -> str | None:
    """The Claude Code CLI the SDK would run: the one in its wheel, else ``claude`` on PATH."""
    spec = importlib.util.find_spec("claude_agent_sdk")  # found, not imported
    if spec is not None and spec.origin is not None:
        bundled = Path(spec.origin).parent / "_bundled" / "claude"
        if bundled.is_file():
            return str(bundled)
    return shutil.which("claude")


def _setpriv() -> str | None:
    """util-linux's ``setpriv``, when it knows ``--pdeathsig`` (2.33 and later)."""
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        return None
    try:
        usage = subprocess.run(
            [setpriv, "--help"], capture_output=True, text=True, timeout=10, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return setpriv if "--pdeathsig" in usage.stdout else None


def _launcher_folder() -> Path:
    """Where the launcher is written, never the home folder: in the virtualenv the harness
    runs from (each venv its own, gone with it), else the session's runtime folder
    (``$XDG_RUNTIME_DIR``), else a folder of this user's own in the temp folder."""
    if sys.prefix != sys.base_prefix and os.access(sys.prefix, os.W_OK):
        return Path(sys.prefix) / "var" / "harness"
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    if runtime and os.access(runtime, os.W_OK):
        return Path(runtime) / "harness"
    return _private_temp_folder()


def _private_temp_folder() -> Path:
    """``<tmp>/harness-<uid>``, made 0700 and checked to be this user's own folder (not a
    link, nobody else's): another user could otherwise place a launcher there first."""
    folder = Path(tempfile.gettempdir()) / f"harness-{os.getuid()}"
    with contextlib.suppress(FileExistsError):
        folder.mkdir(mode=0o700)
    info = folder.lstat()
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid() or info.st_mode & 0o077:
        raise OSError(f"{folder} is not a private folder of this user")
    return folder


def guarded_cli() -> str | None:
    """The path to give ``ClaudeAgentOptions.cli_path``: a launcher that ties the CLI's life to
    the harness's, or None (the SDK's own choice) where that cannot be done. Blocking the
    first time (it may write the launcher), then cached; written again if it went since (a
    cache cleaner, another home), else every agent after would fail to start."""
    launcher = _guarded_cli()
    if launcher is not None and not os.access(launcher, os.X_OK):
        _guarded_cli.cache_clear()
        launcher = _guarded_cli()
    return launcher


def forget_launcher() -> None:
    """The next ``guarded_cli`` looks for its launcher again (its folder changed)."""
    _guarded_cli.cache_clear()


@functools.cache
def _guarded_cli() -> str | None:
    if not sys.platform.startswith("linux"):
        return None
    real = bundled_cli()
    if real is None:
        return None
    try:
        return str(write_launcher(real, _launcher_folder(), setpriv=_setpriv()))
    except OSError as exc:
        logger.warning(
            "could not write the CLI launcher (%s): agents' claude processes will not die "
            "with the harness (leftovers are still killed at the next start)",
            exc,
        )
    return None
