"""Runs first inside an agent's sandbox: ``python -I -S bridge.py SOCKET PROGRAM [ARGS...]``.

The sandbox has no network of its own, only its loopback and one Unix socket on which the
harness, outside, serves the model API (adding the key the agent never sees) and a proxy to
the hosts config allows. Programs speak TCP, so this opens a loopback port inside, forwards
every connection on it to that socket from a forked child, and execs PROGRAM (the Claude
Code CLI) with the model API and the HTTP(S) proxy pointed at the port. The child ends when
PROGRAM does: it holds the read end of a pipe whose write end PROGRAM inherits, and exits at
its end of file. Else it would outlive the CLI in accept() and keep the sandbox's pid 1 (which
waits for every child) alive, wherever bubblewrap's own parent-death signal came too late.

Built-in modules only (``_socket``, ``_thread``, ``posix``), so that it starts on the
interpreter alone (``-I -S``: nothing of the harness is in reach, and ``socket`` or
``threading`` would import a dozen modules before every agent's CLI, about 10 ms of CPU).
"""

import _socket
import _thread
import posix
import sys

_CHUNK = 65536


def _pump(source: _socket.socket, target: _socket.socket) -> None:
    try:
        while data := source.recv(_CHUNK):
            target.sendall(data)
    except OSError:
        pass
    finally:
        # The other direction may still be talking: only say that this one is done.
        try:  # noqa: SIM105 (contextlib.suppress would import contextlib)
            target.shutdown(_socket.SHUT_WR)
        except OSError:
            pass


def _pump_then_release(
    source: _socket.socket, target: _socket.socket, done: _thread.LockType
) -> None:
    try:
        _pump(source, target)
    finally:
        done.release()


def _forward(client: _socket.socket, path: str) -> None:
    upstream = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    try:
        upstream.connect(path)
    except OSError:
        client.close()
        upstream.close()
        return
    back = _thread.allocate_lock()
    back.acquire()
    _thread.start_new_thread(_pump_then_release, (upstream, client, back))
    _pump(client, upstream)
    back.acquire()  # the other direction is done too
    client.close()
    upstream.close()


def _exit_at_end_of_file(fd: int) -> None:
    try:
        while posix.read(fd, 512):
            pass
    finally:
        posix._exit(0)


def _serve(listener: _socket.socket, path: str, program_alive: int) -> None:
    # The CLI's pipes to the harness must close when the CLI ends, not when this child does.
    null = posix.open("/dev/null", posix.O_RDWR)
    for fd in (0, 1, 2):
        posix.dup2(null, fd)
    _thread.start_new_thread(_exit_at_end_of_file, (program_alive,))
    while True:
        fd, _ = listener._accept()  # type: ignore[attr-defined]  # socket.accept's own
        client = _socket.socket(_socket.AF_INET, _socket.SOCK_STREAM, 0, fd)
        _thread.start_new_thread(_forward, (client, path))


def main(argv: list[str]) -> None:
    if len(argv) < 3:
        sys.stderr.write("usage: bridge.py SOCKET PROGRAM [ARGS...]\n")
        raise SystemExit(2)
    path, program, args = argv[1], argv[2], argv[3:]
    listener = _socket.socket(_socket.AF_INET, _socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(128)
    url = f"http://127.0.0.1:{listener.getsockname()[1]}"
    program_alive, held_by_program = posix.pipe()
    if posix.fork() == 0:
        try:
            posix.close(held_by_program)
            _serve(listener, path, program_alive)
        finally:
            posix._exit(0)
    listener.close()
    posix.close(program_alive)
    posix.set_inheritable(held_by_program, True)  # kept open across the exec, by PROGRAM
    env = dict(posix.environ)
    env.update(
        (name.encode(), value.encode())
        for name, value in {
            "ANTHROPIC_BASE_URL": url,
            "HTTPS_PROXY": url,
            "HTTP_PROXY": url,
            "https_proxy": url,
            "http_proxy": url,
            "NO_PROXY": "127.0.0.1,localhost",
            "no_proxy": "127.0.0.1,localhost",
        }.items()
    )
    # This child ends with PROGRAM (the pipe), and bwrap's pid 1 with its last child.
    posix.execve(program, [program, *args], env)


if __name__ == "__main__":
    main(sys.argv)
