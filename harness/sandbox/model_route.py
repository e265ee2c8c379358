"""One model call through the egress proxy: its body read whole (bounded) so it can be
checked before the key is added, then sent on, and the reply relayed as it arrives while its
usage is read from the bytes passing by (``model_calls.UsageReader``)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Sequence
from http import HTTPStatus

from harness.sandbox.model_calls import BODY_LIMIT, ModelCall, Usage, UsageReader, worst_case
from harness.sandbox.wire import CHUNK, HttpError, header, parse_reply_head, until_done

logger = logging.getLogger(__name__)

BODY_TIMEOUT = 60.0  # a whole model request arrives in well under this over loopback
_REPLY_HEAD_LIMIT = 64 * 1024


async def read_body(
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
    headers: Sequence[tuple[str, str]],
    limit: int = BODY_LIMIT,
) -> bytes:
    """The request's body, by its Content-Length or chunked; 413 when it is over ``limit``
    (before it is read, where the length says so), 400 when its framing is not one of those,
    415 when it is compressed (it could not be checked)."""
    if [v for v in header(headers, "content-encoding") if v.lower() != "identity"]:
        raise HttpError(
            HTTPStatus.UNSUPPORTED_MEDIA_TYPE,
            "a compressed model request cannot be checked: send it uncompressed",
            api_error="invalid_request_error",
            final=True,
        )
    coding, length = header(headers, "transfer-encoding"), header(headers, "content-length")
    if coding and (length or [c.lower() for c in coding] != ["chunked"]):
        raise HttpError(HTTPStatus.BAD_REQUEST, "unsupported request body framing")
    if length and (len(set(length)) != 1 or not length[0].isdigit()):
        raise HttpError(HTTPStatus.BAD_REQUEST, "malformed Content-Length")
    if length and int(length[0]) > limit:
        raise _too_large(limit)
    if not coding and not length:
        return b""
    if [v for v in header(headers, "expect") if v.lower() == "100-continue"]:
        writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")
    try:
        async with asyncio.timeout(BODY_TIMEOUT):
            if length:
                return await reader.readexactly(int(length[0]))
            return await _read_chunked(reader, limit)
    except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ValueError):
        raise HttpError(HTTPStatus.BAD_REQUEST, "malformed or incomplete request body") from None
    except TimeoutError:
        raise HttpError(HTTPStatus.REQUEST_TIMEOUT, "the request body was not sent") from None


async def _read_chunked(reader: asyncio.StreamReader, limit: int) -> bytes:
    body = bytearray()
    while True:
        size = int((await reader.readuntil(b"\r\n")).split(b";")[0].strip(), 16)
        if size == 0:
            while await reader.readuntil(b"\r\n") != b"\r\n":  # trailers, dropped
                pass
            return bytes(body)
        if len(body) + size > limit:
            raise _too_large(limit)
        body += await reader.readexactly(size)
        if await reader.readexactly(2) != b"\r\n":
            raise ValueError("chunk not ended by CRLF")


def _too_large(limit: int) -> HttpError:
    return HttpError(
        HTTPStatus.REQUEST_ENTITY_TOO_LARGE,
        f"a model request may be at most {limit // (1024 * 1024)} MiB",
        api_error="request_too_large",
        final=True,
    )


async def relay_reply(
    client: tuple[asyncio.StreamReader, asyncio.StreamWriter],
    remote: tuple[asyncio.StreamReader, asyncio.StreamWriter],
    call: ModelCall,
    body_size: int,
    on_usage: Callable[[ModelCall, Usage], None],
) -> None:
    """Relays the reply to a sent model request to the client, each piece as it comes; for
    a billed call that succeeded, ``on_usage`` with what it used once it ends (read from
    the reply, or the worst case when that cannot be read), even when cut short."""
    watched: list[UsageReader | None] = []

    async def down() -> bool:
        reader, writer = remote[0], client[1]
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            writer.write(head)
            status, headers = parse_reply_head(head)
            watched.append(_usage_reader(call, status, headers))
            while data := await reader.read(CHUNK):
                writer.write(data)  # first to the client: reading usage never delays it
                if watched[0] is not None:
                    watched[0].feed(data)
                await writer.drain()
        except Exception:  # a side gone wrong ends only this call
            logger.debug("sandbox proxy: model reply ended", exc_info=True)
            return False
        return True

    async def watch_client() -> bool:
        # Nothing more is sent on: only the client going away matters (it ends the reply).
        with contextlib.suppress(OSError):
            while await client[0].read(CHUNK):
                pass
            return True
        return False

    try:
        await until_done(watch_client(), down(), both=False)
    finally:
        if watched and watched[0] is not None:
            usage = watched[0].finish() or worst_case(call, body_size)
            on_usage(call, usage)


def _usage_reader(
    call: ModelCall, status: int, headers: Sequence[tuple[str, str]]
) -> UsageReader | None:
    """What reads the usage of this reply; None when it is not billed (not a billed call,
    or an error, which the API does not bill)."""
    if not call.billed or not 200 <= status < 300:
        return None
    streamed = any("text/event-stream" in v.lower() for v in header(headers, "content-type"))
    chunked = any("chunked" in v.lower() for v in header(headers, "transfer-encoding"))
    reader = UsageReader(streamed=streamed, chunked=chunked)
    if [v for v in header(headers, "content-encoding") if v.lower() != "identity"]:
        reader.give_up()  # compressed after all: counted as the worst case
    return reader
