"""A TCP forwarder on loopback whose connections can be cut and restored: one side of a
network partition (a worker cut off from NATS while the harness still reaches it). Cut, it
stops listening too, so a client trying again is refused, as by a host out of reach.

Its port, like ``quiet_port()``'s, is below the kernel's range of ephemeral ports: a client
trying again and again to reach a port nothing listens on may otherwise connect to itself
(TCP's simultaneous open) and hold the port."""

from __future__ import annotations

import asyncio
import contextlib
import random
import socket
from pathlib import Path
from types import TracebackType
from typing import Self


class CuttableProxy:
    """``async with CuttableProxy(port) as proxy:`` forwards ``proxy.url`` to the port on
    loopback; ``cut()`` drops every connection and refuses new ones until ``restore()``."""

    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self.port = quiet_port()
        self._cut = False
        self._server: asyncio.Server | None = None
        self._connections: set[asyncio.Future[None]] = set()

    @property
    def url(self) -> str:
        return f"nats://127.0.0.1:{self.port}"

    async def cut(self) -> None:
        self._cut = True
        await self._stop_listening()
        await self._drop_all()

    async def restore(self) -> None:
        self._cut = False
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", self.port)

    async def __aenter__(self) -> Self:
        await self.restore()
        return self

    async def __aexit__(
        self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._cut = True
        await self._stop_listening()
        await self._drop_all()

    async def _stop_listening(self) -> None:
        server, self._server = self._server, None
        if server is not None:
            server.close()
            await server.wait_closed()

    def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """Each connection is served by a task of the proxy's own, so none outlives it."""
        connection = asyncio.ensure_future(self._serve(reader, writer))
        self._connections.add(connection)
        connection.add_done_callback(self._connections.discard)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_writer: asyncio.StreamWriter | None = None
        try:
            if self._cut:
                return
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.target_port)
            await asyncio.gather(_pump(reader, up_writer), _pump(up_reader, writer))
        except OSError:
            return
        finally:
            for w in (writer, up_writer):
                if w is not None:
                    w.close()

    async def _drop_all(self) -> None:
        connections = list(self._connections)
        for connection in connections:
            connection.cancel()
        await asyncio.gather(*connections, return_exceptions=True)


async def _pump(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    with contextlib.suppress(OSError, ConnectionError):
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    writer.close()


def quiet_port() -> int:
    """A free port on loopback below the ephemeral range (see above)."""
    low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    while True:
        port = random.randrange(max(1024, low - 12000), low)
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
