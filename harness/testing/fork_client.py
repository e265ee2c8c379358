"""The tests' side of ``harness/testing/fork_server.py``: whether a process can come from the
fork server (``python [-X faulthandler] -m MODULE ...`` with this interpreter's settings and
options the fork server honours), starting the fork server at the first one, and asking it for
a child with given descriptors, folder and environment. ``harness/testing/spawn.py`` builds
``subprocess``'s and ``asyncio``'s process objects on it."""

from __future__ import annotations

import array
import atexit
import contextlib
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

_server: _ForkServer | None = None
_starting = threading.Lock()
# The interpreter settings of the fork server (None until use_fork_server()): a process asked
# for with other ones starts the usual way.
_interpreter: dict[str, str | None] | None = None

# Popen's keyword arguments the fork server honours; any other starts the usual way.
_HONOURED = frozenset(
    {
        "stdin",
        "stdout",
        "stderr",
        "cwd",
        "env",
        "text",
        "encoding",
        "errors",
        "universal_newlines",
        "bufsize",
        "start_new_session",
        "close_fds",
    }
)
_SAME_AS_INTERPRETER = (
    "PYTHONPATH",
    "PYTHONHOME",
    "PYTHONSTARTUP",
    "PYTHONSAFEPATH",
    "PYTHONWARNINGS",
    "PYTHONUTF8",
    "PYTHONIOENCODING",
    "PYTHONNOUSERSITE",
    "PYTHONUNBUFFERED",
    "PYTHONDEVMODE",
    "PYTHONFAULTHANDLER",
)


def use_fork_server() -> None:
    """From now on, processes this module starts come from a fork server (started at the
    first one, stopped when this process exits)."""
    global _interpreter
    _interpreter = {name: os.environ.get(name) for name in _SAME_AS_INTERPRETER}


@dataclass(frozen=True)
class Request:
    module: str
    args: list[str]
    faulthandler: bool


def _parse(argv: Sequence[Any]) -> Request | None:
    """``[sys.executable, ("-X", "faulthandler")..., "-m", MODULE, *args]``, else None."""
    if not argv or os.fspath(argv[0]) != sys.executable:
        return None
    rest = [os.fspath(a) for a in argv[1:]]
    handler = False
    while rest[:2] == ["-X", "faulthandler"]:
        handler, rest = True, rest[2:]
    if len(rest) < 2 or rest[0] != "-m":
        return None
    return Request(rest[1], rest[2:], handler)


def forkable(argv: Sequence[Any], kwargs: dict[str, Any]) -> Request | None:
    if _interpreter is None or set(kwargs) - _HONOURED or kwargs.get("close_fds") is False:
        return None
    env = os.environ if kwargs.get("env") is None else kwargs["env"]
    if any(env.get(name) != value for name, value in _interpreter.items()):
        return None
    return _parse(argv)


class _ForkServer:
    def __init__(self, interpreter: dict[str, str | None]) -> None:
        self._folder = tempfile.mkdtemp(prefix="fork-server-")
        self.path = str(Path(self._folder) / "socket")
        env = {k: v for k, v in os.environ.items() if k not in interpreter}
        env.update((k, v) for k, v in interpreter.items() if v is not None)
        self._process = subprocess.Popen(
            [sys.executable, "-m", "harness.testing.fork_server", self.path],
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
        )
        assert self._process.stdout is not None
        line = self._process.stdout.readline()
        if line != b"ready\n":
            raise RuntimeError(f"the fork server did not start: {line!r}")
        atexit.register(self.stop)

    def spawn(
        self, request: Request, env: dict[str, str], cwd: str, fds: Sequence[int], session: bool
    ) -> tuple[int, socket.socket]:
        conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        conn.connect(self.path)
        payload = {
            "module": request.module,
            "args": request.args,
            "faulthandler": request.faulthandler,
            "env": env,
            "cwd": cwd,
            "new_session": session,
        }
        conn.sendmsg(
            [json.dumps(payload).encode("utf-8")],
            [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds).tobytes())],
        )
        pid = int(read_line(conn))
        return pid, conn

    def stop(self) -> None:
        if self._process.poll() is None:
            assert self._process.stdin is not None
            self._process.stdin.close()
            try:
                self._process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
        if self._process.stdout is not None:
            self._process.stdout.close()
        with contextlib.suppress(OSError):
            os.unlink(self.path)
        with contextlib.suppress(OSError):
            os.rmdir(self._folder)


# The wait status a child is given when the fork server went away before telling its own: an
# exit code of 255, as asyncio reports a child it lost.
SERVER_GONE = 255 << 8


def wait_status(line: bytes) -> int:
    """The wait status in the fork server's last line, or SERVER_GONE when the connection
    ended before a whole one came."""
    return int(line) if line.endswith(b"\n") and line[:-1].isdigit() else SERVER_GONE


def read_line(conn: socket.socket) -> bytes:
    data = b""
    while not data.endswith(b"\n"):
        part = conn.recv(64)
        if not part:
            raise ConnectionError("the fork server closed the connection")
        data += part
    return data


def _fork_server() -> _ForkServer:
    global _server
    assert _interpreter is not None
    with _starting:  # asyncio's processes are asked for from threads
        if _server is None:
            _server = _ForkServer(_interpreter)
        return _server


def spawn_child(
    request: Request, env: Any, cwd: Any, fds: Sequence[int], session: bool
) -> tuple[int, socket.socket]:
    environment = dict(os.environ if env is None else env)
    folder = os.fspath(cwd) if cwd is not None else os.getcwd()
    return _fork_server().spawn(request, environment, folder, fds, session)
