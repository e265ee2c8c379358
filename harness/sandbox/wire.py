"""HTTP/1.1 as the egress proxy speaks it: request heads parsed strictly, the proxy's own
answers, connections out, and bytes relayed without being held back."""

from __future__ import annotations

import asyncio
import json
import logging
import re
import ssl
from collections.abc import Awaitable, Sequence
from http import HTTPStatus

from harness.sandbox.hosts import shown

logger = logging.getLogger(__name__)

CONNECT_TIMEOUT = 30.0  # an unanswered SYN would otherwise wait for the kernel's minutes
CHUNK = 64 * 1024

TOKEN = r"[!#$%&'*+.^_`|~0-9A-Za-z-]+"
# Strict on purpose: a stray CR or LF could hide from this parse a line the server would see.
_REQUEST_LINE = re.compile(rf"({TOKEN}) ([!-~]+) HTTP/1\.\d")
_HEADER_LINE = re.compile(rf"({TOKEN}):[ \t]*([^\r\n]*?)[ \t]*")
_STATUS_LINE = re.compile(r"HTTP/1\.\d (\d{3})(?: [^\r\n]*)?")


class HttpError(Exception):
    """Answer the client with this status and a one-line body, then close. To the model
    API's clients (``api_error``: its error type) the body is the API's JSON error, and
    ``final`` adds ``x-should-retry: false`` so the CLI stops rather than retrying."""

    def __init__(
        self,
        status: HTTPStatus,
        text: str,
        *,
        api_error: str | None = None,
        final: bool = False,
        headers: Sequence[tuple[str, str]] = (),
    ) -> None:
        super().__init__(text)
        self.status = status
        self.text = text
        self.api_error = api_error
        self.final = final
        self.headers = tuple(headers)

    def response(self) -> bytes:
        said = f"harness sandbox: {self.text}"
        if self.api_error is None:
            body, kind = f"{said}\n".encode(), "text/plain; charset=utf-8"
        else:
            error = {"type": "error", "error": {"type": self.api_error, "message": said}}
            body, kind = (json.dumps(error) + "\n").encode(), "application/json"
        headers = [*self.headers, *([("x-should-retry", "false")] if self.final else [])]
        head = (
            f"HTTP/1.1 {self.status.value} {self.status.phrase}\r\n"
            f"Content-Type: {kind}\r\n"
            + "".join(f"{name}: {value}\r\n" for name, value in headers)
            + f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
        )
        return head.encode() + body


def parse_head(head: bytes) -> tuple[str, str, list[tuple[str, str]]]:
    """A request head -> (method, target, headers); HttpError 400 if it is not one."""
    first, *rest = head.decode("latin-1").lstrip("\r\n").split("\r\n")[:-2]
    if not (request := _REQUEST_LINE.fullmatch(first)):
        raise HttpError(HTTPStatus.BAD_REQUEST, "malformed request line")
    headers = [_HEADER_LINE.fullmatch(line) for line in rest]
    if not all(headers):
        raise HttpError(HTTPStatus.BAD_REQUEST, "malformed header line")
    return request[1], request[2], [(m[1], m[2]) for m in headers if m]


def parse_reply_head(head: bytes) -> tuple[int, list[tuple[str, str]]]:
    """A reply head -> (status, headers); ValueError if it is not one."""
    first, *rest = head.decode("latin-1").split("\r\n")[:-2]
    if not (status := _STATUS_LINE.fullmatch(first)):
        raise ValueError("not an HTTP/1.1 status line")
    headers = [(name.strip(), value.strip()) for name, _, value in (r.partition(":") for r in rest)]
    return int(status[1]), headers


def header(headers: Sequence[tuple[str, str]], name: str) -> list[str]:
    """The values of header ``name`` (lower case)."""
    return [value for key, value in headers if key.lower() == name]


def request_head(
    request_line: str, headers: Sequence[tuple[str, str]], extra: bytes = b""
) -> bytes:
    lines = [request_line, *(f"{name}: {value}" for name, value in headers)]
    return ("\r\n".join(lines) + "\r\n").encode("latin-1") + extra + b"Connection: close\r\n\r\n"


async def open_remote(
    host: str, port: int, tls: ssl.SSLContext | None = None
) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    try:
        async with asyncio.timeout(CONNECT_TIMEOUT):
            return await asyncio.open_connection(
                host, port, ssl=tls, server_hostname=host if tls else None, limit=CHUNK
            )
    except OSError as exc:  # refused, unresolved, timed out, TLS failed: all OSErrors
        reason = exc.strerror or str(exc) or "timed out"
        raise HttpError(
            HTTPStatus.BAD_GATEWAY, f"could not reach {shown(host, port)}: {reason}"
        ) from None


async def pump(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, eof: bool) -> bool:
    """Copy until end of stream (then pass the half-close on if ``eof``); False if it failed."""
    try:
        while data := await reader.read(CHUNK):  # whatever has arrived: nothing is held back
            writer.write(data)
            await writer.drain()
        if eof and writer.can_write_eof():
            writer.write_eof()
    except Exception:  # a side gone wrong ends only this connection
        logger.debug("sandbox proxy: relay ended", exc_info=True)
        return False
    return True


async def splice(
    client: tuple[asyncio.StreamReader, asyncio.StreamWriter],
    remote: tuple[asyncio.StreamReader, asyncio.StreamWriter],
    tunnel: bool,
) -> None:
    """Relay both ways. A tunnel ends when both sides have finished; a request when its reply
    has (the client may keep its side open, waiting to reuse the connection)."""
    await until_done(
        pump(client[0], remote[1], eof=tunnel), pump(remote[0], client[1], eof=tunnel), tunnel
    )


async def until_done(up: Awaitable[bool], down: Awaitable[bool], both: bool) -> None:
    """Runs both directions of a relay: to the end of both (``both``), else to the end of
    ``down``; either failing ends the other."""
    up_task, down_task = asyncio.ensure_future(up), asyncio.ensure_future(down)
    pending = {up_task, down_task}
    try:
        while pending:
            done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
            if not all(task.result() for task in done) or (down_task in done and not both):
                break
    finally:
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)
