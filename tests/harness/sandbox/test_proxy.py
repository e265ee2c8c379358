"""The sandbox's egress proxy, over its real Unix socket, against real servers on loopback: model
requests get the real key in place of the placeholder, replies stream back as sent, CONNECT and
plain http reach allowed hosts only, and the key is never logged."""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import json
import logging
import socket
import ssl
import stat
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import aiohttp
import pytest
from aiohttp import web

from harness.sandbox.model_calls import ModelPolicy, Usage, price
from harness.sandbox.proxy import EgressProxy, ProxyLimits, Upstream, host_allowed
from harness.testing.clock import FakeClock

pytestmark = pytest.mark.anyio

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


@pytest.fixture
async def serve() -> AsyncIterator[Serve]:
    """``port = await serve(handler)``: a TCP server on loopback; a handler's failure fails
    the test."""
    servers: list[asyncio.Server] = []
    handlers: list[asyncio.Task[None]] = []

    async def start(handler: Handler, tls: ssl.SSLContext | None = None) -> int:
        async def guarded(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            try:
                await asyncio.wait_for(handler(reader, writer), WAIT)
            finally:
                writer.close()
                with contextlib.suppress(OSError):
                    await writer.wait_closed()

        def accept(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            handlers.append(asyncio.create_task(guarded(reader, writer)))

        server = await asyncio.start_server(accept, "127.0.0.1", 0, ssl=tls)
        servers.append(server)
        port: int = server.sockets[0].getsockname()[1]
        return port

    yield start
    for server in servers:
        server.close()
        await server.wait_closed()
    await asyncio.gather(*handlers)


@pytest.fixture
async def start_proxy(tmp_path: Path) -> AsyncIterator[StartProxy]:
    """``await start_proxy(upstream, allow, on_refused, **options)``, closed after the test
    (``models`` is ``MODELS`` unless given); nothing may reach the event loop's exception
    handler meanwhile."""
    proxies: list[EgressProxy] = []
    escaped: list[dict[str, Any]] = []
    loop = asyncio.get_running_loop()
    loop.set_exception_handler(lambda _, context: escaped.append(context))

    async def start(
        upstream: Upstream | None = None,
        allow: Sequence[str] = (),
        on_refused: Callable[[str], None] | None = None,
        **options: Any,
    ) -> EgressProxy:
        upstream = upstream or Upstream(f"http://127.0.0.1:{free_port()}", {"x-api-key": KEY})
        path = tmp_path / f"egress{len(proxies)}.sock"
        options.setdefault("models", MODELS)
        proxy = EgressProxy(path, upstream, allow, on_refused=on_refused, **options)
        await proxy.start()
        proxies.append(proxy)
        return proxy

    try:
        yield start
        for proxy in proxies:
            await proxy.close()
    finally:
        loop.set_exception_handler(None)
    assert not escaped


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


async def dropped(proxy: EgressProxy, data: bytes) -> bool:
    """Whether the proxy ends the connection without answering at all, as an unreachable
    server would look to the client."""
    async with connection(proxy, data) as (reader, _):
        try:
            return await asyncio.wait_for(reader.read(), WAIT) == b""
        except ConnectionResetError:
            return True


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


def refusal_text(shown: str) -> str:
    return (
        f"harness sandbox: {shown} is not an allowed host; add it to sandbox.network.allow in "
        "config.yaml to let agents reach it\n"
    )


# --- model requests -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "credentials", [{"x-api-key": KEY}, {"authorization": f"Bearer {KEY}"}], ids=["key", "token"]
)
async def test_a_model_request_reaches_the_upstream_with_the_real_credential_only(
    serve: Serve, start_proxy: StartProxy, credentials: Mapping[str, str]
) -> None:
    seen: list[Seen] = []
    ok = b'HTTP/1.1 200 OK\r\nContent-Length: 9\r\nConnection: close\r\n\r\n{"ok": 1}'
    port = await serve(replying(seen, ok))
    proxy = await start_proxy(Upstream(f"http://127.0.0.1:{port}/some/prefix/", credentials))

    reply = await exchange(proxy, model_request())

    assert reply.startswith(b"HTTP/1.1 200 OK\r\n")
    assert reply.endswith(b'\r\n\r\n{"ok": 1}')
    [request] = seen
    assert request.line == "POST /some/prefix/v1/messages?beta=true HTTP/1.1"
    assert request.get("host") == [f"127.0.0.1:{port}"]
    [(name, value)] = credentials.items()
    assert request.get(name) == [value]
    assert request.get("x-api-key" if name == "authorization" else "authorization") == []
    assert PLACEHOLDER not in str(request.headers)
    assert request.get("connection") == ["close"]
    assert request.get("content-type") == ["application/json"]
    assert request.body == b'{"model": "m", "max_tokens": 10}'
    assert request.get("accept-encoding") == ["identity"]  # so its usage can be read


async def test_a_streamed_reply_arrives_event_by_event_before_the_upstream_finishes(
    serve: Serve, start_proxy: StartProxy
) -> None:
    first_read = asyncio.Event()

    async def model(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(
            b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
            b"Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
            b"12\r\nevent: one\ndata: 1\n\n\r\n"
        )
        await writer.drain()
        await first_read.wait()  # the rest only once the client has had the first event
        writer.write(b"12\r\nevent: two\ndata: 2\n\n\r\n0\r\n\r\n")
        await writer.drain()

    port = await serve(model)
    proxy = await start_proxy(Upstream(f"http://127.0.0.1:{port}", {"x-api-key": KEY}))
    async with connection(proxy, model_request()) as (reader, _):
        head = await asyncio.wait_for(reader.readuntil(b"event: one\ndata: 1\n\n\r\n"), WAIT)
        first_read.set()
        rest = await asyncio.wait_for(reader.read(), WAIT)

    assert head.startswith(b"HTTP/1.1 200 OK\r\n")
    assert rest == b"12\r\nevent: two\ndata: 2\n\n\r\n0\r\n\r\n"


async def test_a_real_client_streams_a_chunked_body_up_and_server_sent_events_back(
    start_proxy: StartProxy,
) -> None:
    seen: dict[str, object] = {}

    async def messages(request: web.Request) -> web.StreamResponse:
        seen["path"] = request.path_qs
        seen["key"] = request.headers.getall("x-api-key", [])
        seen["body"] = await request.read()
        reply = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await reply.prepare(request)
        for n in range(3):
            await reply.write(f"event: n\ndata: {n}\n\n".encode())
        await reply.write_eof()
        return reply

    app = web.Application()
    app.router.add_post("/v1/messages", messages)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    proxy = await start_proxy(Upstream(f"http://127.0.0.1:{port}", {"x-api-key": KEY}))

    async def body() -> AsyncIterator[bytes]:
        for part in (b'{"model":', b' "m", "max_tokens": 5}'):
            yield part

    try:
        connector = aiohttp.UnixConnector(path=str(proxy.socket_path))
        async with (
            aiohttp.ClientSession(connector=connector) as session,
            session.post(
                "http://127.0.0.1:1/v1/messages?beta=true",
                headers={"x-api-key": PLACEHOLDER},
                data=body(),
            ) as response,
        ):
            text = await asyncio.wait_for(response.text(), WAIT)
    finally:
        await runner.cleanup()

    assert response.status == 200
    assert text == "".join(f"event: n\ndata: {n}\n\n" for n in range(3))
    body_sent = b'{"model": "m", "max_tokens": 5}'
    assert seen == {"path": "/v1/messages?beta=true", "key": [KEY], "body": body_sent}


async def test_a_model_api_over_https_is_reached_with_tls_and_its_host_name_checked(
    serve: Serve, start_proxy: StartProxy, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ca, server_tls = await asyncio.to_thread(make_certificates, tmp_path)
    monkeypatch.setenv("SSL_CERT_FILE", str(ca))  # what ssl.create_default_context() trusts
    seen: list[Seen] = []
    ok = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok"
    port = await serve(replying(seen, ok), server_tls)
    good = await start_proxy(Upstream(f"https://localhost:{port}", {"x-api-key": KEY}))
    reply = await exchange(good, model_request())
    # The certificate names localhost, not 127.0.0.1: a connection to the wrong name fails.
    wrong = await start_proxy(Upstream(f"https://127.0.0.1:{port}", {"x-api-key": KEY}))

    assert reply.endswith(b"\r\n\r\nok")
    assert [request.get("x-api-key") for request in seen] == [[KEY]]
    assert seen[0].get("host") == [f"localhost:{port}"]
    assert await dropped(wrong, model_request())


def make_certificates(folder: Path) -> tuple[Path, ssl.SSLContext]:
    """A CA's certificate (in a file) and a server's TLS context with a certificate the CA
    signed for localhost."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    now = datetime.datetime.now(datetime.UTC)

    def signed(subject: str, key: Any, issuer: str, issuer_key: Any, extension: Any) -> Any:
        return (
            x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(x509.NameOID.COMMON_NAME, subject)]))
            .issuer_name(x509.Name([x509.NameAttribute(x509.NameOID.COMMON_NAME, issuer)]))
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(extension, critical=True)
            .sign(issuer_key, hashes.SHA256())
        )

    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = signed(
        "test ca", ca_key, "test ca", ca_key, x509.BasicConstraints(ca=True, path_length=None)
    )
    key = ec.generate_private_key(ec.SECP256R1())
    names = x509.SubjectAlternativeName([x509.DNSName("localhost")])
    cert = signed("localhost", key, "test ca", ca_key, names)
    ca_file = folder / "ca.pem"
    ca_file.write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    chain = folder / "server.pem"
    chain.write_bytes(
        cert.public_bytes(serialization.Encoding.PEM)
        + key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(chain)
    return ca_file, context


# --- CONNECT and plain http ---------------------------------------------------------------


async def echo(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """Send back what arrives; on its end, end too."""
    while data := await reader.read(1024):
        writer.write(data)
        await writer.drain()
    writer.write_eof()


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


# --- what goes wrong ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "request_head",
    [
        b"NONSENSE\r\n\r\n",
        b"GET /v1/messages\r\n\r\n",
        b"GET /v1/messages HTTP/1.1\r\nno colon here\r\n\r\n",
        b"GET /v1/messages HTTP/1.1\r\nX-A: a\nx-api-key: b\r\n\r\n",
        b"GET /v1/messages\n HTTP/1.1\r\n\r\n",
        b"CONNECT pypi.org HTTP/1.1\r\n\r\n",
        b"GET ftp://pypi.org/ HTTP/1.1\r\n\r\n",
        b"GET http://pypi.org:https/ HTTP/1.1\r\n\r\n",
        b"GET http://[::1/ HTTP/1.1\r\n\r\n",
        b"GET /v1/messages HTTP/1.1\r\nX-Long: " + b"a" * 70_000,
    ],
    ids=[
        "no-target",
        "no-version",
        "header",
        "bare-lf",
        "lf-in-target",
        "connect-no-port",
        "ftp",
        "url-port",
        "url-v6",
        "too-long",
    ],
)
async def test_a_malformed_request_gets_400(start_proxy: StartProxy, request_head: bytes) -> None:
    proxy = await start_proxy()

    status, text = await answer(proxy, request_head)

    assert status == 400
    assert text.startswith("harness sandbox: ")
    assert text.count("\n") == 1


async def test_an_allowed_host_that_cannot_be_reached_gets_502(start_proxy: StartProxy) -> None:
    port = free_port()
    proxy = await start_proxy(allow=["127.0.0.1"])

    status, text = await answer(proxy, f"CONNECT 127.0.0.1:{port} HTTP/1.1\r\n\r\n".encode())

    assert status == 502
    assert text.startswith(f"harness sandbox: could not reach 127.0.0.1:{port}: ")


async def test_a_model_api_that_cannot_be_reached_drops_the_connection_as_it_would_itself(
    start_proxy: StartProxy,
) -> None:
    port = free_port()
    proxy = await start_proxy(Upstream(f"http://127.0.0.1:{port}", {"x-api-key": KEY}))

    assert await dropped(proxy, model_request())


async def test_the_key_is_never_logged(
    serve: Serve, start_proxy: StartProxy, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    hung_up, upstream_done = asyncio.Event(), asyncio.Event()

    async def model(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1\r\na\r\n")
        await writer.drain()
        if hung_up.is_set():  # the second request: answered whole
            writer.write(b"0\r\n\r\n")
            await writer.drain()
            return
        await hung_up.wait()
        writer.write(b"1\r\nb\r\n")  # for a client that is gone
        await writer.drain()
        assert await reader.read() == b""  # the proxy gave up on the reply
        upstream_done.set()

    port = await serve(model)
    upstream = Upstream(f"http://127.0.0.1:{port}", {"x-api-key": KEY})
    proxy = await start_proxy(upstream, ["127.0.0.1:1"])
    # A client that hangs up halfway through the reply.
    async with connection(proxy, model_request()) as (reader, _):
        await asyncio.wait_for(reader.readuntil(b"1\r\na\r\n"), WAIT)
    hung_up.set()
    await asyncio.wait_for(upstream_done.wait(), WAIT)
    # A whole reply, then a refusal, an unreachable host, nonsense, an unreachable model API.
    whole = await exchange(proxy, model_request())
    heads = [b"CONNECT 127.0.0.1:2 HTTP/1.1\r\n\r\n", b"CONNECT 127.0.0.1:1 HTTP/1.1\r\n\r\n"]
    statuses = [(await answer(proxy, head))[0] for head in [*heads, b"BAD\r\n\r\n"]]
    unreachable = await start_proxy(Upstream(f"http://127.0.0.1:{free_port()}", {"x-api-key": KEY}))
    gone = await dropped(unreachable, model_request())
    await proxy.close()
    await unreachable.close()

    assert whole.endswith(b"1\r\na\r\n0\r\n\r\n")
    assert statuses == [403, 502, 400] and gone
    assert any(record.exc_info for record in caplog.records)  # tracebacks were logged too
    assert KEY not in caplog.text
    assert not [record for record in caplog.records if KEY in record.getMessage()]
    assert KEY not in repr(upstream)


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


# --- only the CLI's model calls: its models, its limits, its budget; every one counted ------


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


def post(path: str, body: bytes, *, method: str = "POST") -> bytes:
    return (
        f"{method} {path} HTTP/1.1\r\nx-api-key: {PLACEHOLDER}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
    ).encode() + body


@pytest.mark.parametrize(
    "request_bytes",
    [
        b"GET /v1/models HTTP/1.1\r\n\r\n",
        post("/v1/files", b"{}"),
        b"DELETE /v1/messages/batches/msgbatch_1 HTTP/1.1\r\n\r\n",
        post("/v1/messages/batches", b'{"requests": []}'),
        b"GET /v1/organizations/me HTTP/1.1\r\n\r\n",
        b"TRACE /v1/messages HTTP/1.1\r\n\r\n",
        b"HEAD /api/hello HTTP/1.1\r\n\r\n",
        post("/v1/messages?beta=true&x=1", b'{"model": "m", "max_tokens": 10}'),
    ],
    ids=["models", "files", "delete", "batches", "organizations", "trace", "hello", "query"],
)
async def test_a_call_other_than_the_clis_gets_403_and_never_reaches_the_model_api(
    serve: Serve, start_proxy: StartProxy, caplog: pytest.LogCaptureFixture, request_bytes: bytes
) -> None:
    seen: list[Seen] = []
    port = await serve(replying(seen, OK_REPLY))
    proxy = await start_proxy(Upstream(f"http://127.0.0.1:{port}", {"x-api-key": KEY}))

    status, headers, message = await api_answer(proxy, request_bytes)
    after = await exchange(proxy, model_request())  # served in order: the refused one is past

    assert status == 403 and headers["x-should-retry"] == "false"
    assert "is not a model call: the sandbox forwards only POST /v1/messages" in message
    assert after.endswith(b'{"ok": 1}')
    assert [request.line for request in seen] == ["POST /v1/messages?beta=true HTTP/1.1"]
    assert "refused a model call" in caplog.text


@pytest.mark.parametrize(
    ("body", "said"),
    [
        (b'{"model": "claude-mythos-5-2", "max_tokens": 10}', "model 'claude-mythos-5-2' is not"),
        (b'{"model": "m", "max_tokens": 64000}', "max_tokens 64000 is not within"),
        (b'{"model": "m"}', "max_tokens None is not within"),
        (b"not json", "not a JSON object"),
    ],
)
async def test_another_model_or_more_output_tokens_gets_400_and_never_reaches_the_model_api(
    serve: Serve, start_proxy: StartProxy, body: bytes, said: str
) -> None:
    seen: list[Seen] = []
    port = await serve(replying(seen, OK_REPLY))
    proxy = await start_proxy(Upstream(f"http://127.0.0.1:{port}", {"x-api-key": KEY}))

    status, headers, message = await api_answer(proxy, model_request(body))
    await exchange(proxy, model_request())

    assert status == 400 and headers["x-should-retry"] == "false"
    assert said in message
    assert [request.body for request in seen] == [b'{"model": "m", "max_tokens": 10}']


async def test_a_request_body_over_32_mib_gets_413_before_it_is_read(
    start_proxy: StartProxy,
) -> None:
    proxy = await start_proxy()
    head = b"POST /v1/messages HTTP/1.1\r\nContent-Length: 33554433\r\n\r\n"

    status, headers, message = await api_answer(proxy, head)

    assert status == 413 and headers["x-should-retry"] == "false"
    assert "at most 32 MiB" in message


def event(name: str, data: dict[str, Any]) -> bytes:
    return f"event: {name}\ndata: {json.dumps(data)}\n\n".encode()


SSE_BODY = (
    event(
        "message_start",
        {"type": "message_start", "message": {"usage": {"input_tokens": 1000, "output_tokens": 1}}},
    )
    + event("content_block_delta", {"type": "content_block_delta", "delta": {"text": "hi"}})
    + event("message_delta", {"type": "message_delta", "usage": {"output_tokens": 500}})
    + event("message_stop", {"type": "message_stop"})
)


def chunks(data: bytes, size: int) -> bytes:
    parts = [data[at : at + size] for at in range(0, len(data), size)]
    return b"".join(b"%x\r\n%s\r\n" % (len(part), part) for part in parts) + b"0\r\n\r\n"


@pytest.mark.parametrize(
    ("reply", "usage"),
    [
        (
            b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
            b"Transfer-Encoding: chunked\r\n\r\n" + chunks(SSE_BODY, 33),
            Usage(input_tokens=1000, output_tokens=500),
        ),
        (
            b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n\r\n"
            b'{"usage": {"input_tokens": 7, "output_tokens": 9}}',
            Usage(input_tokens=7, output_tokens=9),
        ),
        (  # no usage to read: the worst case (every request byte a token, all of max_tokens)
            b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n\r\n{}",
            Usage(input_tokens=len(b'{"model": "m", "max_tokens": 10}'), output_tokens=10),
        ),
        (b"HTTP/1.1 529 Overloaded\r\nContent-Length: 2\r\n\r\n{}", None),
    ],
    ids=["stream", "json", "unreadable", "error"],
)
async def test_every_model_reply_is_counted_as_it_passes(
    serve: Serve, start_proxy: StartProxy, reply: bytes, usage: Usage | None
) -> None:
    port = await serve(replying([], reply))
    counted: list[tuple[float, Usage]] = []
    proxy = await start_proxy(
        Upstream(f"http://127.0.0.1:{port}", {"x-api-key": KEY}),
        on_usage=lambda cost, used: counted.append((cost, used)),
    )

    relayed = await exchange(proxy, model_request())

    assert relayed == reply
    if usage is None:
        assert counted == [] and proxy.spent_usd == 0
    else:
        assert counted == [(price("m", usage), usage)]
        assert proxy.spent_usd == price("m", usage)


async def test_token_counting_goes_on_and_is_not_billed(
    serve: Serve, start_proxy: StartProxy
) -> None:
    seen: list[Seen] = []
    port = await serve(replying(seen, OK_REPLY))
    counted: list[float] = []
    proxy = await start_proxy(
        Upstream(f"http://127.0.0.1:{port}", {"x-api-key": KEY}),
        on_usage=lambda cost, _: counted.append(cost),
    )

    reply = await exchange(proxy, post("/v1/messages/count_tokens?beta=true", b'{"model": "m"}'))

    assert reply.endswith(b'{"ok": 1}')
    assert seen[0].get("x-api-key") == [KEY] and counted == []


async def test_once_the_budget_is_spent_no_further_model_call_is_made(
    serve: Serve, start_proxy: StartProxy
) -> None:
    reply = b'HTTP/1.1 200 OK\r\n\r\n{"usage": {"input_tokens": 1000, "output_tokens": 1000}}'
    seen: list[Seen] = []
    port = await serve(replying(seen, reply))
    budget = price("m", Usage(input_tokens=1000, output_tokens=1000))
    proxy = await start_proxy(
        Upstream(f"http://127.0.0.1:{port}", {"x-api-key": KEY}), budget_usd=budget
    )

    first = await exchange(proxy, model_request())
    status, headers, message = await api_answer(proxy, model_request())

    assert first == reply
    assert status == 402 and headers["x-should-retry"] == "false"
    assert "this agent's budget ($0.09) is spent" in message
    assert len(seen) == 1


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
