"""Starting ``python -m harness ...`` (or ``-m bot...``) processes for tests: ``run``,
``Popen`` and ``create_subprocess_exec`` take what their ``subprocess`` and ``asyncio``
namesakes take and return the same kind of object.

Once ``use_fork_server()`` was called (the test session does), such a process is forked from
``harness/testing/fork_server.py``, which has imported the harness already, instead of a new
interpreter importing it again: the same module run as ``__main__`` in a process of its own,
at a fraction of the CPU. Anything else (another program, interpreter options other than
``-X faulthandler``, a different ``PYTHON*`` environment, ``preexec_fn``...) starts as
``subprocess`` starts it. Without ``use_fork_server()`` (demos, benches) every process starts
as ``subprocess`` starts it.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import subprocess
from functools import partial
from typing import IO, Any, Literal, cast, overload

from harness.testing.fork_client import (
    forkable,
    read_line,
    spawn_child,
    use_fork_server,
    wait_status,
)

__all__ = ["ForkedProcess", "Popen", "create_subprocess_exec", "run", "use_fork_server"]


class Popen(subprocess.Popen[Any]):
    """``subprocess.Popen``; a ``python -m`` process comes from the fork server."""

    def __init__(self, args: Any, **kwargs: Any) -> None:
        self._request = forkable(args, kwargs)
        self._status: socket.socket | None = None
        self._ended = 0
        super().__init__(args, **kwargs)

    def _execute_child(
        self,
        args: Any,
        executable: Any,
        preexec_fn: Any,
        close_fds: Any,
        pass_fds: Any,
        cwd: Any,
        env: Any,
        startupinfo: Any,
        creationflags: Any,
        shell: Any,
        p2cread: int,
        p2cwrite: int,
        c2pread: int,
        c2pwrite: int,
        errread: int,
        errwrite: int,
        *rest: Any,
    ) -> None:
        if self._request is None:
            super()._execute_child(  # type: ignore[misc]
                args,
                executable,
                preexec_fn,
                close_fds,
                pass_fds,
                cwd,
                env,
                startupinfo,
                creationflags,
                shell,
                p2cread,
                p2cwrite,
                c2pread,
                c2pwrite,
                errread,
                errwrite,
                *rest,
            )
            return
        session = bool(rest[-2])  # start_new_session, before process_group
        fds = [
            p2cread if p2cread != -1 else 0,
            c2pwrite if c2pwrite != -1 else 1,
            errwrite if errwrite != -1 else 2,
        ]
        try:
            self.pid, self._status = spawn_child(self._request, env, cwd, fds, session)
        finally:
            self._close_pipe_fds(  # type: ignore[attr-defined]
                p2cread, p2cwrite, c2pread, c2pwrite, errread, errwrite
            )
        self._child_created = True

    def _status_of(self, block: bool) -> int | None:
        """The child's wait status once the fork server told it (None while it runs)."""
        assert self._status is not None
        if self._status.fileno() == -1:
            return self._ended
        self._status.setblocking(block)
        try:
            line = read_line(self._status)
        except BlockingIOError:
            return None
        except ConnectionError:
            line = b""
        self._ended = wait_status(line)
        self._status.close()
        return self._ended

    def _internal_poll(self, _deadstate: Any = None, *args: Any, **kwargs: Any) -> int | None:
        if self._status is None:
            return super()._internal_poll(_deadstate, *args, **kwargs)  # type: ignore[misc, no-any-return]
        lock = self._waitpid_lock  # type: ignore[attr-defined]
        # As subprocess does: another thread waiting holds the lock, and then nothing is known.
        if self.returncode is None and lock.acquire(False):
            try:
                if self.returncode is None:
                    status = self._status_of(block=False)
                    if status is not None:
                        self._handle_exitstatus(status)  # type: ignore[attr-defined]
            finally:
                lock.release()
        return self.returncode

    def _try_wait(self, wait_flags: int) -> tuple[int, int]:
        if self._status is None:
            return super()._try_wait(wait_flags)  # type: ignore[misc, no-any-return]
        status = self._status_of(block=not wait_flags & os.WNOHANG)
        return (0, 0) if status is None else (self.pid, status)


@overload
def run(
    args: Any,
    *,
    text: Literal[True],
    input: str | None = None,
    capture_output: bool = False,
    timeout: float | None = None,
    check: bool = False,
    **kwargs: Any,
) -> subprocess.CompletedProcess[str]: ...


@overload
def run(
    args: Any,
    *,
    text: Literal[False] = False,
    input: bytes | None = None,
    capture_output: bool = False,
    timeout: float | None = None,
    check: bool = False,
    **kwargs: Any,
) -> subprocess.CompletedProcess[bytes]: ...


def run(
    args: Any,
    *,
    text: bool = False,
    input: Any = None,
    capture_output: bool = False,
    timeout: float | None = None,
    check: bool = False,
    **kwargs: Any,
) -> subprocess.CompletedProcess[Any]:
    """``subprocess.run``; a ``python -m`` process comes from the fork server."""
    kwargs["text"] = text
    if input is not None:
        kwargs["stdin"] = subprocess.PIPE
    if capture_output:
        kwargs["stdout"] = kwargs["stderr"] = subprocess.PIPE
    with Popen(args, **kwargs) as process:
        try:
            stdout, stderr = process.communicate(input, timeout=timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
            raise
        except BaseException:
            process.kill()
            raise
        code = process.poll()
        assert code is not None
    if check and code:
        raise subprocess.CalledProcessError(code, args, output=stdout, stderr=stderr)
    return subprocess.CompletedProcess(args, code, stdout, stderr)


class ForkedProcess:
    """What ``asyncio.create_subprocess_exec`` returns, for a process of the fork server."""

    def __init__(
        self,
        pid: int,
        status: socket.socket,
        stdin: asyncio.StreamWriter | None,
        stdout: asyncio.StreamReader | None,
        stderr: asyncio.StreamReader | None,
    ) -> None:
        self.pid = pid
        self.returncode: int | None = None
        self.stdin, self.stdout, self.stderr = stdin, stdout, stderr
        self._status = status
        self._ended = asyncio.ensure_future(self._follow())

    async def _follow(self) -> int:
        loop = asyncio.get_running_loop()
        self._status.setblocking(False)
        data = b""
        while not data.endswith(b"\n"):
            part = await loop.sock_recv(self._status, 64)
            if not part:
                break
            data += part
        self._status.close()
        self.returncode = os.waitstatus_to_exitcode(wait_status(data))
        return self.returncode

    async def wait(self) -> int:
        return await asyncio.shield(self._ended)

    def send_signal(self, sig: int) -> None:
        if self.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, sig)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    async def communicate(self, input: bytes | None = None) -> tuple[bytes | None, bytes | None]:
        if self.stdin is not None:
            if input:
                self.stdin.write(input)
                with contextlib.suppress(ConnectionError):
                    await self.stdin.drain()
            self.stdin.close()
        stdout = self.stdout.read() if self.stdout is not None else _none()
        stderr = self.stderr.read() if self.stderr is not None else _none()
        out, err = await asyncio.gather(stdout, stderr)
        await self.wait()
        return out, err


async def _none() -> None:
    return None


async def create_subprocess_exec(
    program: Any, *args: Any, **kwargs: Any
) -> asyncio.subprocess.Process:
    """``asyncio.create_subprocess_exec``; a ``python -m`` process comes from the fork
    server."""
    request = forkable([program, *args], kwargs)
    if request is None:
        return await asyncio.create_subprocess_exec(program, *args, **kwargs)
    loop = asyncio.get_running_loop()
    ours: list[IO[bytes] | None] = [None, None, None]
    theirs: list[int] = []
    opened: list[int] = []
    for n, name in enumerate(("stdin", "stdout", "stderr")):
        choice = kwargs.get(name)
        if choice == subprocess.PIPE:
            read, write = os.pipe()
            mine, child = (write, read) if n == 0 else (read, write)
            ours[n] = os.fdopen(mine, "wb" if n == 0 else "rb", buffering=0)
            theirs.append(child)
            opened.append(child)
        elif choice == subprocess.DEVNULL:
            fd = os.open(os.devnull, os.O_RDWR)
            theirs.append(fd)
            opened.append(fd)
        elif choice == subprocess.STDOUT and n == 2:
            theirs.append(theirs[1])
        elif choice is None:
            theirs.append(n)
        elif isinstance(choice, int):
            theirs.append(choice)
        else:
            theirs.append(choice.fileno())
    try:
        pid, status = await asyncio.to_thread(
            spawn_child,
            request,
            kwargs.get("env"),
            kwargs.get("cwd"),
            theirs,
            bool(kwargs.get("start_new_session")),
        )
    finally:
        for fd in opened:
            os.close(fd)
    stdin = stdout = stderr = None
    if ours[0] is not None:
        transport, protocol = await loop.connect_write_pipe(
            lambda: asyncio.streams.FlowControlMixin(loop=loop), ours[0]
        )
        stdin = asyncio.StreamWriter(transport, protocol, None, loop)
    readers: list[asyncio.StreamReader | None] = [None, None]
    for n in (1, 2):
        pipe = ours[n]
        if pipe is not None:
            reader = asyncio.StreamReader(limit=2**16, loop=loop)
            await loop.connect_read_pipe(partial(asyncio.StreamReaderProtocol, reader), pipe)
            readers[n - 1] = reader
    stdout, stderr = readers
    # What callers use of a Process (pid, returncode, its streams, wait, communicate,
    # signals), ForkedProcess has.
    return cast("asyncio.subprocess.Process", ForkedProcess(pid, status, stdin, stdout, stderr))
