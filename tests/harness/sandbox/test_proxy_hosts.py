"""The egress proxy's other traffic: CONNECT and plain http reach allowed hosts only (the
allow list's matching, a malformed entry refused), and a host not allowed is asked about
exactly."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from harness.sandbox.proxy import EgressProxy, Upstream, host_allowed
from tests.harness.sandbox.proxy_support import (
    MODELS,
    WAIT,
    Seen,
    Serve,
    StartProxy,
    answer,
    connection,
    echo,
    exchange,
    replying,
)

pytestmark = pytest.mark.anyio


def refusal_text(shown: str) -> str:
    return (
        f"harness sandbox: {shown} is not an allowed host; add it to sandbox.network.allow in "
        "config.yaml to let agents reach it\n"
    )


# --- CONNECT and plain http ---------------------------------------------------------------


async def test_connect_to_an_allowed_host_tunnels_bytes_both_ways_until_both_sides_end(
    serve: Serve, start_proxy: StartProxy
) -> None:
    port = await serve(echo)
    proxy = await start_proxy(allow=[f"127.0.0.1:{port}"])
    head = f"CONNECT 127.0.0.1:{port} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n"
    async with connection(proxy, head.encode()) as (reader, writer):
        established = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), WAIT)
        writer.write(b"ping")
        pong = await asyncio.wait_for(reader.readexactly(4), WAIT)
        writer.write(b"more")
        writer.write_eof()  # half-closed: the echo still answers, then ends
        rest = await asyncio.wait_for(reader.read(), WAIT)

    assert established == b"HTTP/1.1 200 Connection Established\r\n\r\n"
    assert (pong, rest) == (b"ping", b"more")


async def test_connect_to_a_host_not_allowed_is_refused_with_the_fix_and_never_made(
    serve: Serve, start_proxy: StartProxy
) -> None:
    arrived = asyncio.Event()
    connections = 0

    async def counted(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal connections
        connections += 1
        arrived.set()

    port = await serve(counted)
    refused: list[str] = []
    proxy = await start_proxy(allow=["127.0.0.1:1", "pypi.org"], on_refused=refused.append)

    status, text = await answer(proxy, f"CONNECT 127.0.0.1:{port} HTTP/1.1\r\n\r\n".encode())
    # Connections are accepted in order: once this one is seen, an earlier one would have been.
    _, probe = await asyncio.open_connection("127.0.0.1", port)
    await asyncio.wait_for(arrived.wait(), WAIT)
    probe.close()
    await probe.wait_closed()

    assert (status, text) == (403, refusal_text(f"127.0.0.1:{port}"))
    assert refused == [f"127.0.0.1:{port}"]
    assert connections == 1  # the probe's only


async def test_a_plain_http_request_to_an_allowed_host_goes_on_in_origin_form(
    serve: Serve, start_proxy: StartProxy
) -> None:
    seen: list[Seen] = []
    port = await serve(replying(seen, b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello"))
    proxy = await start_proxy(allow=["LOCALHOST.", "127.0.0.1"])

    reply = await exchange(
        proxy,
        f"GET http://127.0.0.1:{port}/simple/pkg/?v=1 HTTP/1.1\r\n"
        "Host: elsewhere.example\r\n"
        "Proxy-Authorization: Basic cGxhY2Vob2xkZXI=\r\n"
        "Proxy-Connection: keep-alive\r\n"
        "Accept: text/html\r\n\r\n".encode(),
    )

    assert reply.endswith(b"\r\n\r\nhello")
    [request] = seen
    assert request.line == "GET /simple/pkg/?v=1 HTTP/1.1"
    assert request.headers == [
        ("Accept", "text/html"),
        ("Host", f"127.0.0.1:{port}"),
        ("Connection", "close"),
    ]


async def test_a_plain_http_request_to_a_host_not_allowed_is_refused(
    start_proxy: StartProxy,
) -> None:
    refused: list[str] = []
    proxy = await start_proxy(allow=["*.example.com"], on_refused=refused.append)

    status, text = await answer(
        proxy, b"GET http://Example.COM/ HTTP/1.1\r\nHost: example.com\r\n\r\n"
    )

    assert (status, text) == (403, refusal_text("example.com:80"))
    assert refused == ["example.com:80"]


# --- the allow list -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("host", "port", "allow", "allowed"),
    [
        ("pypi.org", 443, ["pypi.org"], True),
        ("pypi.org", 80, ["pypi.org"], True),
        ("evil-pypi.org", 443, ["pypi.org"], False),
        ("files.pypi.org", 443, ["pypi.org"], False),
        ("files.pythonhosted.org", 443, ["*.pythonhosted.org"], True),
        ("a.b.pythonhosted.org", 443, ["*.pythonhosted.org"], True),
        ("pythonhosted.org", 443, ["*.pythonhosted.org"], False),
        ("xpythonhosted.org", 443, ["*.pythonhosted.org"], False),
        ("example.com", 8443, ["example.com:8443"], True),
        ("example.com", 443, ["example.com:8443"], False),
        ("127.0.0.1", 9000, ["127.0.0.1:9000"], True),
        ("127.0.0.1", 9001, ["127.0.0.1:9000"], False),
        ("PyPI.Org", 443, ["pypi.org"], True),
        ("pypi.org", 443, ["PYPI.ORG"], True),
        ("pypi.org.", 443, ["pypi.org"], True),
        ("pypi.org", 443, ["pypi.org."], True),
        ("[::1]", 443, ["[::1]:443"], True),
        ("::1", 443, ["[::1]:443"], True),
        ("::1", 80, ["[::1]:443"], False),
        ("::1", 80, ["::1"], True),
        ("pypi.org", 443, [], False),
        ("github.com", 443, ["pypi.org", "*.github.com", "github.com:443"], True),
    ],
)
def test_host_allowed(host: str, port: int, allow: list[str], allowed: bool) -> None:
    assert host_allowed(host, port, allow) is allowed


@pytest.mark.parametrize("entry", ["", "*", "a.*.org", "pypi.org:https", "pypi.org:0", "[::1"])
def test_a_malformed_allow_entry_is_refused_when_the_proxy_is_made(
    tmp_path: Path, entry: str
) -> None:
    with pytest.raises(ValueError):
        EgressProxy(tmp_path / "s", Upstream("http://m", {}), [entry], models=MODELS)


# --- host names ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "request_bytes",
    [
        b"CONNECT pypi.org/.evil.com:443 HTTP/1.1\r\n\r\n",
        b"CONNECT pypi.org\\.evil.com:443 HTTP/1.1\r\n\r\n",
        b"CONNECT 1.2.3:443 HTTP/1.1\r\n\r\n",
        b"CONNECT 0x7f000001:443 HTTP/1.1\r\n\r\n",
        b"CONNECT [fe80::1%25eth0]:443 HTTP/1.1\r\n\r\n",
        b"CONNECT a..b:443 HTTP/1.1\r\n\r\n",
        b"GET http://pypi.org%2f.evil.com/ HTTP/1.1\r\n\r\n",
        b"GET http://pypi.org\\.evil.com/ HTTP/1.1\r\n\r\n",
    ],
)
async def test_a_name_that_is_no_host_name_gets_400_and_is_never_asked(
    start_proxy: StartProxy, request_bytes: bytes
) -> None:
    asked: list[tuple[str, int]] = []

    async def ask(host: str, port: int) -> bool:
        asked.append((host, port))
        return False

    proxy = await start_proxy(ask=ask)

    status, text = await answer(proxy, request_bytes)

    assert status == 400 and "is not a host name or an IP address" in text
    assert asked == []


async def test_the_question_is_of_the_exact_host_and_port(start_proxy: StartProxy) -> None:
    asked: list[tuple[str, int]] = []

    async def ask(host: str, port: int) -> bool:
        asked.append((host, port))
        return False

    proxy = await start_proxy(ask=ask)
    for head in (
        b"CONNECT [::1]:8443 HTTP/1.1\r\n\r\n",
        b"CONNECT PyPI.org.:443 HTTP/1.1\r\n\r\n",
        b"GET http://user@Example.com:8080/x HTTP/1.1\r\n\r\n",
    ):
        assert (await answer(proxy, head))[0] == 403

    assert asked == [("::1", 8443), ("pypi.org", 443), ("example.com", 8080)]
