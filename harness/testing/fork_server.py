"""A process that has imported the harness once and forks a ready ``python -m MODULE`` for
each test that starts one: ``python -m harness.testing.fork_server SOCKET``.

A ``harness bot`` or ``harness worker`` spends most of its CPU importing (the Claude Agent SDK
and the MCP types it loads, aiohttp, Bolt, the config schema: about a second per process on
the machines we test on), and the suite starts a few hundred of them. Forked from here, each is
still a process of its own (its pid, its signals, its descriptors, its environment, its
folder), running the module's ``__main__`` as ``python -m`` would, only without importing
what this process already has. ``harness/testing/fork_client.py`` is the client (and
``spawn.py`` its ``subprocess`` and ``asyncio`` faces); the tests that are about start-up itself
(imports, packaging) run the interpreter as users do.

The protocol, one Unix connection per process: the request (JSON: module, args, env, cwd,
faulthandler, new_session) with the child's stdin, stdout and stderr as SCM_RIGHTS; the answer
``PID\\n`` once forked, then ``STATUS\\n`` (the raw wait status) when the child ends. This
process stays single-threaded (a fork copies only the calling thread), reaps its children on
SIGCHLD, and ends when its standard input closes (the test process that started it ended).
"""

from __future__ import annotations

import array
import contextlib
import faulthandler
import gc
import importlib
import io
import json
import os
import runpy
import selectors
import signal
import socket
import sys
from typing import Any

# What the processes tests start import; a module not listed is imported by the child itself.
PRELOADED = (
    "harness.cli.main",
    "harness.cli.commands",
    "harness.runtime.claude",
    "harness.runtime.worker",
    "harness.runtime.nats_hosting",
    "harness.mcp_server.cli",
    "harness.mcp_server.server",
    "bot.cli",
    "bot.server",
    "bot.app",
    "bot.testing.clocked_bot",
    "claude_agent_sdk",
    "nats",
)
MAX_FDS = 3
MAX_REQUEST = 1 << 20


def preload() -> None:
    for name in PRELOADED:
        # An optional part missing (nats-py): the child that needs it says so itself.
        with contextlib.suppress(ImportError):
            importlib.import_module(name)


def receive(conn: socket.socket) -> tuple[dict[str, Any], list[int]]:
    fds = array.array("i")
    data, ancillary, _flags, _addr = conn.recvmsg(
        MAX_REQUEST, socket.CMSG_SPACE(MAX_FDS * fds.itemsize)
    )
    for level, kind, payload in ancillary:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            fds.frombytes(payload[: len(payload) - (len(payload) % fds.itemsize)])
    return json.loads(data.decode("utf-8")), list(fds)


def serve(path: str) -> tuple[dict[str, Any], list[int]]:
    """Serves until standard input closes (then exits), or returns in a forked child with
    its request and descriptors."""
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(64)
    wake_read, wake_write = os.pipe()
    os.set_blocking(wake_write, False)
    signal.set_wakeup_fd(wake_write)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    selector = selectors.DefaultSelector()
    selector.register(listener, selectors.EVENT_READ, "accept")
    selector.register(wake_read, selectors.EVENT_READ, "reap")
    selector.register(sys.stdin.fileno(), selectors.EVENT_READ, "stdin")
    waiting: dict[int, socket.socket] = {}
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    while True:
        for key, _events in selector.select():
            if key.data == "stdin":
                if not os.read(sys.stdin.fileno(), 4096):
                    os._exit(0)
            elif key.data == "reap":
                os.read(wake_read, 4096)
                reap(waiting)
            else:
                conn, _ = listener.accept()
                try:
                    request, fds = receive(conn)
                except (OSError, ValueError):
                    conn.close()
                    continue
                pid = os.fork()
                if pid == 0:
                    signal.set_wakeup_fd(-1)
                    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
                    selector.close()
                    for fd in (listener.fileno(), wake_read, wake_write, conn.fileno()):
                        os.close(fd)
                    for other in waiting.values():
                        os.close(other.fileno())
                    return request, fds
                for fd in fds:
                    os.close(fd)
                with contextlib.suppress(OSError):
                    conn.sendall(f"{pid}\n".encode())
                waiting[pid] = conn
        reap(waiting)


def reap(waiting: dict[int, socket.socket]) -> None:
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        conn = waiting.pop(pid, None)
        if conn is not None:
            with contextlib.suppress(OSError):
                conn.sendall(f"{status}\n".encode())
            conn.close()


def become(request: dict[str, Any], fds: list[int]) -> None:
    """In the forked child: take the request's descriptors, folder and environment, then run
    the module as ``python -m`` does."""
    if request.get("new_session"):
        os.setsid()
    for target, fd in enumerate(fds):
        os.dup2(fd, target)
    for fd in fds:
        if fd > 2:
            os.close(fd)
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    sys.stdin = io.TextIOWrapper(io.FileIO(0, "r", closefd=False), encoding="utf-8")
    sys.stdout = io.TextIOWrapper(
        io.BufferedWriter(io.FileIO(1, "w", closefd=False)), encoding="utf-8"
    )
    sys.stderr = io.TextIOWrapper(
        io.FileIO(2, "w", closefd=False),
        encoding="utf-8",
        errors="backslashreplace",
        line_buffering=True,
        write_through=True,
    )
    if request.get("faulthandler"):
        faulthandler.enable()
    sys.path[0] = os.getcwd()
    sys.argv = [request["module"], *request["args"]]
    runpy.run_module(request["module"], run_name="__main__", alter_sys=True)


def main() -> None:
    path = sys.argv[1]
    preload()
    # What was imported stays out of every child's garbage collections: a collection walks
    # every tracked object, writing to its header, so each page the fork shared gets copied.
    gc.freeze()
    request, fds = serve(path)
    become(request, fds)


if __name__ == "__main__":
    main()
