"""What the egress proxy's tests share: a loopback server's view of a request, connections to
the proxy's socket and the answers read from them, the requests a model client sends."""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import ssl
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from harness.sandbox.model_calls import ModelPolicy
from harness.sandbox.proxy import EgressProxy, Upstream

WAIT = 10.0
KEY = "sk-ant-the-real-key-0123456789"
PLACEHOLDER = "sk-ant-placeholder"
MODELS = ModelPolicy({"m": 1000})

Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


class Serve(Protocol):
    def __call__(self, handler: Handler, tls: ssl.SSLContext | None = None) -> Awaitable[int]: ...


class StartProxy(Protocol):
    def __call__(
        self,
        upstream: Upstream | None = None,
        allow: Sequence[str] = (),
        on_refused: Callable[[str], None] | None = None,
        **options: Any,
    ) -> Awaitable[EgressProxy]: ...


@dataclass
class Seen:
    """A request as a test server received it."""

    line: str
    headers: list[tuple[str, str]]
    body: bytes

    def get(self, name: str) -> list[str]:
        return [value for key, value in self.headers if key.lower() == name]


async def read_request(reader: asyncio.StreamReader) -> Seen:
    head = await reader.readuntil(b"\r\n\r\n")
    line, *rest = head.decode("latin-1").split("\r\n")[:-2]
    headers = [(name.strip(), value.strip()) for name, _, value in (r.partition(":") for r in rest)]
    seen = Seen(line, headers, b"")
    if length := seen.get("content-length"):
        seen.body = await reader.readexactly(int(length[0]))
    return seen


def free_port() -> int:
    """A loopback port nobody listens on (it was free a moment ago)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@contextlib.asynccontextmanager
async def connection(
    proxy: EgressProxy, data: bytes
) -> AsyncIterator[tuple[asyncio.StreamReader, asyncio.StreamWriter]]:
    """A new connection to the proxy with ``data`` sent on it, closed after (the proxy may
    have closed it first)."""
    reader, writer = await asyncio.open_unix_connection(proxy.socket_path)
    try:
        writer.write(data)
        await writer.drain()
        yield reader, writer
    finally:
        writer.close()
        with contextlib.suppress(ConnectionError):
            await writer.wait_closed()


async def exchange(proxy: EgressProxy, data: bytes) -> bytes:
    """Send ``data`` on a new connection to the proxy; everything it answers, to its close."""
    async with connection(proxy, data) as (reader, _):
        return await asyncio.wait_for(reader.read(), WAIT)


async def answer(proxy: EgressProxy, data: bytes) -> tuple[int, str]:
    """The status and body of the proxy's own answer (read by its length: the proxy may close
    before it has read all that was sent)."""
    async with connection(proxy, data) as (reader, _):
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), WAIT)
        lines = head.decode().split("\r\n")
        [length] = [int(line[15:]) for line in lines if line.startswith("Content-Length:")]
        body = await asyncio.wait_for(reader.readexactly(length), WAIT)
        return int(lines[0].split(" ")[1]), body.decode()


def replying(seen: list[Seen], reply: bytes) -> Handler:
    """A server's handler that keeps the request it reads in ``seen`` and answers ``reply``."""

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        seen.append(await read_request(reader))
        writer.write(reply)
        await writer.drain()

    return handle


def model_request(body: bytes = b'{"model": "m", "max_tokens": 10}') -> bytes:
    return (
        b"POST /v1/messages?beta=true HTTP/1.1\r\n"
        b"Host: 127.0.0.1:41234\r\n"
        b"x-api-key: " + PLACEHOLDER.encode() + b"\r\n"
        b"Authorization: Bearer " + PLACEHOLDER.encode() + b"\r\n"
        b"Connection: keep-alive\r\n"
        b"Content-Type: application/json\r\n"
        b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body
    )


async def echo(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """Send back what arrives; on its end, end too."""
    while data := await reader.read(1024):
        writer.write(data)
        await writer.drain()
    writer.write_eof()


OK_REPLY = b'HTTP/1.1 200 OK\r\nContent-Length: 9\r\nConnection: close\r\n\r\n{"ok": 1}'


async def api_answer(proxy: EgressProxy, data: bytes) -> tuple[int, dict[str, str], str]:
    """The status, headers and error message of the proxy's own answer to a model client."""
    async with connection(proxy, data) as (reader, _):
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), WAIT)
        lines = head.decode().split("\r\n")
        headers = {n.lower(): v.strip() for n, _, v in (line.partition(":") for line in lines[1:])}
        body = await asyncio.wait_for(reader.readexactly(int(headers["content-length"])), WAIT)
    assert body.count(b"\n") == 1  # one line
    error = json.loads(body)
    assert error["type"] == "error"
    return int(lines[0].split(" ")[1]), headers, error["error"]["message"]
