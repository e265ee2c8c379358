"""Runs first inside an agent's sandbox: ``python -I -S bridge.py SOCKET PROGRAM [ARGS...]``.

The sandbox has no network of its own, only its loopback and one Unix socket on which the
harness, outside, serves the model API (adding the key the agent never sees) and a proxy to
the hosts config allows. Programs speak TCP, so this opens a loopback port inside, forwards
every connection on it to that socket from a forked child, and execs PROGRAM (the Claude
Code CLI) with the model API and the HTTP(S) proxy pointed at the port.

Standard library only, and nothing imported that ``-I -S`` does not give: it runs on the
harness's Python, read-only, before anything of the harness is in reach.
"""

import contextlib
import os
import socket
import sys
import threading

_CHUNK = 65536


def _pump(source: socket.socket, target: socket.socket) -> None:
    try:
        while data := source.recv(_CHUNK):
            target.sendall(data)
    except OSError:
        pass
    finally:
        # The other direction may still be talking: only say that this one is done.
        with contextlib.suppress(OSError):
            target.shutdown(socket.SHUT_WR)


def _forward(client: socket.socket, path: str) -> None:
    upstream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        upstream.connect(path)
    except OSError:
        client.close()
        upstream.close()
        return
    back = threading.Thread(target=_pump, args=(upstream, client), daemon=True)
    back.start()
    _pump(client, upstream)
    back.join()
    client.close()
    upstream.close()


def _serve(listener: socket.socket, path: str) -> None:
    # The CLI's pipes to the harness must close when the CLI ends, not when this child does.
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    while True:
        client, _ = listener.accept()
        threading.Thread(target=_forward, args=(client, path), daemon=True).start()


def main(argv: list[str]) -> None:
    if len(argv) < 3:
        sys.stderr.write("usage: bridge.py SOCKET PROGRAM [ARGS...]\n")
        raise SystemExit(2)
    path, program, args = argv[1], argv[2], argv[3:]
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(128)
    url = f"http://127.0.0.1:{listener.getsockname()[1]}"
    if os.fork() == 0:
        try:
            _serve(listener, path)
        finally:
            os._exit(0)
    listener.close()
    env = dict(os.environ)
    env.update(
        ANTHROPIC_BASE_URL=url,
        HTTPS_PROXY=url,
        HTTP_PROXY=url,
        https_proxy=url,
        http_proxy=url,
        NO_PROXY="127.0.0.1,localhost",
        no_proxy="127.0.0.1,localhost",
    )
    # The sandbox ends with PROGRAM (bwrap's pid 1 then goes, taking this child along).
    os.execve(program, [program, *args], env)


if __name__ == "__main__":
    main(sys.argv)
