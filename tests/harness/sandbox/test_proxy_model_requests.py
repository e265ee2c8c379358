"""The egress proxy's model requests, over its real Unix socket against servers on loopback:
the real key in place of the placeholder, replies streamed back as sent, TLS to the model API,
what goes wrong answered as a server would, and the key never logged."""

from __future__ import annotations

import asyncio
import datetime
import logging
import ssl
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from harness.sandbox.proxy import EgressProxy, Upstream
from tests.harness.sandbox.proxy_support import (
    KEY,
    PLACEHOLDER,
    WAIT,
    Seen,
    Serve,
    StartProxy,
    answer,
    connection,
    exchange,
    free_port,
    model_request,
    read_request,
    replying,
)

pytestmark = pytest.mark.anyio


async def dropped(proxy: EgressProxy, data: bytes) -> bool:
    """Whether the proxy ends the connection without answering at all, as an unreachable
    server would look to the client."""
    async with connection(proxy, data) as (reader, _):
        try:
            return await asyncio.wait_for(reader.read(), WAIT) == b""
        except ConnectionResetError:
            return True


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
