"""Only the CLI's model calls pass the egress proxy: its models and output limit, a body's size,
every reply counted as it passes, and no call once the budget is spent."""

from __future__ import annotations

import json
from typing import Any

import pytest

from harness.sandbox.model_calls import Usage, price
from harness.sandbox.proxy import Upstream
from tests.harness.sandbox.proxy_support import (
    KEY,
    OK_REPLY,
    PLACEHOLDER,
    Seen,
    Serve,
    StartProxy,
    api_answer,
    exchange,
    model_request,
    replying,
)

pytestmark = pytest.mark.anyio


def post(path: str, body: bytes, *, method: str = "POST") -> bytes:
    return (
        f"{method} {path} HTTP/1.1\r\nx-api-key: {PLACEHOLDER}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
    ).encode() + body


# --- only the CLI's model calls: its models, its limits, its budget; every one counted ------


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
