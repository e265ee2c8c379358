"""The egress proxy's socket and connections: its owner's alone and gone after close, open
connections ended by close, and a sandbox's connections and request rate limited."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import stat
from pathlib import Path

import pytest

from harness.sandbox.proxy import EgressProxy, ProxyLimits, Upstream
from harness.testing.clock import FakeClock
from tests.harness.sandbox.proxy_support import (
    KEY,
    MODELS,
    OK_REPLY,
    WAIT,
    Serve,
    StartProxy,
    answer,
    api_answer,
    connection,
    echo,
    exchange,
    model_request,
    replying,
)

pytestmark = pytest.mark.anyio


# --- the socket and the proxy's life ------------------------------------------------------


async def test_the_socket_is_for_its_owner_only_and_gone_after_close(tmp_path: Path) -> None:
    path = tmp_path / "egress.sock"
    with socket.socket(socket.AF_UNIX) as stale:
        stale.bind(str(path))  # left by a run that did not close: replaced

    async with EgressProxy(path, Upstream("http://127.0.0.1:1", {}), models=MODELS) as proxy:
        mode = path.stat().st_mode
        assert proxy.socket_path == path

    assert stat.S_ISSOCK(mode)
    assert stat.S_IMODE(mode) == 0o600
    assert not path.exists()


async def test_close_ends_the_connections_still_open(serve: Serve, start_proxy: StartProxy) -> None:
    port = await serve(echo)
    proxy = await start_proxy(allow=["127.0.0.1"])
    head = f"CONNECT 127.0.0.1:{port} HTTP/1.1\r\n\r\n"
    async with connection(proxy, head.encode()) as (reader, _):
        await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), WAIT)

        await asyncio.wait_for(proxy.close(), WAIT)
        rest = await asyncio.wait_for(reader.read(), WAIT)

    assert rest == b""
    assert not proxy.socket_path.exists()


# --- limits -------------------------------------------------------------------------------


async def test_past_its_connections_a_sandbox_gets_429_at_once_and_one_warning_a_burst(
    serve: Serve, start_proxy: StartProxy, caplog: pytest.LogCaptureFixture
) -> None:
    port = await serve(echo)
    proxy = await start_proxy(
        allow=["127.0.0.1"], limits=ProxyLimits(connections=2, rate=1000, burst=1000)
    )
    head = f"CONNECT 127.0.0.1:{port} HTTP/1.1\r\n\r\n".encode()
    async with contextlib.AsyncExitStack() as stack:
        tunnels = [await stack.enter_async_context(connection(proxy, head)) for _ in range(2)]
        for reader, _ in tunnels:
            await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), WAIT)
        refused = [await api_answer(proxy, model_request()) for _ in range(5)]
        reader, writer = tunnels[0]
        writer.write_eof()  # the echo ends too, and the tunnel with it: its place is free
        assert await asyncio.wait_for(reader.read(), WAIT) == b""
        admitted = await api_answer(proxy, b"GET /v1/models HTTP/1.1\r\n\r\n")

    assert {(status, headers["retry-after"]) for status, headers, _ in refused} == {(429, "1")}
    assert (
        "too many connections from this sandbox (at most 2 at once, 1000 a second)" in refused[0][2]
    )
    assert admitted[0] == 403
    warnings = [r for r in caplog.records if "too many connections" in r.getMessage()]
    assert len(warnings) == 1 and warnings[0].levelno == logging.WARNING


async def test_past_its_rate_a_sandbox_gets_429(start_proxy: StartProxy) -> None:
    proxy = await start_proxy(limits=ProxyLimits(connections=100, rate=0.001, burst=3))

    statuses = [(await answer(proxy, b"BAD\r\n\r\n"))[0] for _ in range(3)]
    status, _, _ = await api_answer(proxy, b"BAD\r\n\r\n")

    assert statuses == [400, 400, 400] and status == 429


async def test_the_rate_refills_as_the_proxys_clock_moves_and_warns_once_a_burst(
    start_proxy: StartProxy, caplog: pytest.LogCaptureFixture
) -> None:
    clock = FakeClock()
    proxy = await start_proxy(limits=ProxyLimits(connections=100, rate=2, burst=2), clock=clock)

    async def statuses(count: int) -> list[int]:
        answered = []
        for _ in range(count):
            async with connection(proxy, b"BAD\r\n\r\n") as (reader, _):
                head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), WAIT)
            answered.append(int(head.split(b" ")[1]))
        return answered

    def warnings() -> int:
        return sum("too many connections" in r.getMessage() for r in caplog.records)

    assert await statuses(3) == [400, 400, 429]  # the burst, then refused
    clock.advance(0.5)  # one connection's worth at 2 a second
    assert await statuses(2) == [400, 429]
    assert warnings() == 1  # a second burst within 10 s: not said again
    clock.advance(60)  # a long quiet fills the bucket up to its burst, no further
    assert await statuses(3) == [400, 400, 429]
    assert warnings() == 2


async def test_a_connection_that_says_nothing_is_closed(start_proxy: StartProxy) -> None:
    proxy = await start_proxy(limits=ProxyLimits(head_timeout=0.05))

    async with connection(proxy, b"") as (reader, _):
        assert await asyncio.wait_for(reader.read(), WAIT) == b""


async def test_a_flooded_sandbox_does_not_keep_another_from_its_model(
    serve: Serve, start_proxy: StartProxy
) -> None:
    port = await serve(replying([], OK_REPLY))
    upstream = Upstream(f"http://127.0.0.1:{port}", {"x-api-key": KEY})
    flooded = await start_proxy(upstream, limits=ProxyLimits(connections=4))
    other = await start_proxy(upstream)
    async with contextlib.AsyncExitStack() as stack:
        for _ in range(40):  # held, saying nothing
            await stack.enter_async_context(connection(flooded, b""))
        status, _, _ = await api_answer(flooded, model_request())
        reply = await exchange(other, model_request())

    assert status == 429
    assert reply.endswith(b'{"ok": 1}')
