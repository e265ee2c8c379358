"""The model proxy's pure checks: which calls go on, which models and limits, what a reply
used and what that costs."""

from __future__ import annotations

import json

import pytest

from harness.sandbox.hosts import valid_host
from harness.sandbox.model_calls import (
    CLI_MAX_TOKENS,
    ModelCall,
    ModelPolicy,
    RefusedCall,
    Usage,
    UsageReader,
    canonical,
    check_request,
    endpoint,
    model_policy,
    price,
    prices_for,
    worst_case,
)

LIMIT = "is not within this agent's limit for claude-sonnet-5-5 (1 to 128000)"
POLICY = ModelPolicy({"claude-sonnet-5-5": 128000, "claude-haiku-5-5": 128000})


@pytest.mark.parametrize(
    ("method", "target", "billed"),
    [
        ("POST", "/v1/messages?beta=true", True),
        ("POST", "/v1/messages", True),
        ("POST", "/v1/messages/count_tokens?beta=true", False),
    ],
)
def test_the_clis_own_calls_are_model_calls(method: str, target: str, billed: bool) -> None:
    assert endpoint(method, target) is billed


@pytest.mark.parametrize(
    ("method", "target"),
    [
        ("GET", "/v1/models"),
        ("POST", "/v1/files"),
        ("DELETE", "/v1/messages/batches/msgbatch_1"),
        ("POST", "/v1/messages/batches"),
        ("GET", "/v1/organizations/me"),
        ("TRACE", "/v1/messages"),
        ("GET", "/v1/messages"),
        ("HEAD", "/api/hello"),
        ("POST", "/v1/messages?beta=true&other=1"),
        ("POST", "/v1/messages/../models"),
        ("POST", "/v1//messages"),
        ("post", "/v1/messages"),
    ],
)
def test_every_other_call_is_refused_with_403(method: str, target: str) -> None:
    with pytest.raises(RefusedCall) as refused:
        endpoint(method, target)

    assert refused.value.status == 403 and refused.value.final
    assert f"{method} {target.partition('?')[0]} is not a model call" in refused.value.message
    assert "\n" not in refused.value.message


def body(**fields: object) -> bytes:
    return json.dumps({"messages": [], "stream": True, **fields}).encode()


def test_a_call_of_an_allowed_model_within_its_limit_is_let_through() -> None:
    call = check_request(body(model="claude-sonnet-5-5", max_tokens=128000), POLICY, billed=True)

    assert call == ModelCall("claude-sonnet-5-5", 128000, billed=True)


@pytest.mark.parametrize(
    ("fields", "said"),
    [
        ({"model": "claude-mythos-5-2", "max_tokens": 10}, "model 'claude-mythos-5-2' is not"),
        ({"model": "Claude-Sonnet-5-5", "max_tokens": 10}, "model 'Claude-Sonnet-5-5' is not"),
        ({"max_tokens": 10}, "model None is not one this agent may use"),
        ({"model": "claude-sonnet-5-5", "max_tokens": 128001}, f"max_tokens 128001 {LIMIT}"),
        ({"model": "claude-sonnet-5-5"}, f"max_tokens None {LIMIT}"),
        ({"model": "claude-sonnet-5-5", "max_tokens": "9"}, f"max_tokens '9' {LIMIT}"),
        ({"model": "claude-sonnet-5-5", "max_tokens": 0}, f"max_tokens 0 {LIMIT}"),
        ({"model": "claude-sonnet-5-5", "max_tokens": True}, f"max_tokens True {LIMIT}"),
    ],
)
def test_another_model_or_more_output_tokens_is_refused_with_400_naming_it(
    fields: dict[str, object], said: str
) -> None:
    with pytest.raises(RefusedCall) as refused:
        check_request(body(**fields), POLICY, billed=True)

    assert refused.value.status == 400 and refused.value.final
    assert said in refused.value.message
    if "model" not in fields or fields["model"] != "claude-sonnet-5-5":  # what it may use
        assert "claude-sonnet-5-5 (max_tokens 128000)" in refused.value.message


@pytest.mark.parametrize("raw", [b"", b"not json", b"[1]", b'"x"', b"\xff"])
def test_a_body_that_is_not_a_json_object_is_refused(raw: bytes) -> None:
    with pytest.raises(RefusedCall, match="not a JSON object"):
        check_request(raw, POLICY, billed=True)


def test_token_counting_needs_an_allowed_model_but_no_max_tokens() -> None:
    call = check_request(body(model="claude-haiku-5-5"), POLICY, billed=False)

    assert call == ModelCall("claude-haiku-5-5", None, billed=False)
    with pytest.raises(RefusedCall):
        check_request(body(model="claude-opus-5-5"), POLICY, billed=False)


@pytest.mark.parametrize(
    ("role_model", "env", "allowed"),
    [
        (None, {}, {"claude-opus-5-5": 128000, "claude-haiku-5-5": 128000}),
        ("sonnet", {}, {"claude-sonnet-5-5": 128000, "sonnet": 128000, "claude-haiku-5-5": 128000}),
        ("claude-sonnet-4-5", {}, {"claude-sonnet-4-5": 32000, "claude-haiku-5-5": 128000}),
        (
            "claude-sonnet-4-5-20250929",
            {},
            {
                "claude-sonnet-4-5": 32000,
                "claude-sonnet-4-5-20250929": 32000,
                "claude-haiku-5-5": 128000,
            },
        ),
        (
            "claude-opus-4-1",
            {},
            {"claude-opus-5-5": 128000, "claude-opus-4-1": 128000, "claude-haiku-5-5": 128000},
        ),
        ("my-gateway-model", {}, {"my-gateway-model": 32000, "claude-haiku-5-5": 128000}),
        (
            None,
            {"ANTHROPIC_MODEL": "claude-sonnet-5", "ANTHROPIC_SMALL_FAST_MODEL": "haiku"},
            {"claude-sonnet-5": 64000, "claude-haiku-5-5": 128000, "haiku": 128000},
        ),
        (
            "claude-sonnet-5",
            {"CLAUDE_CODE_MAX_OUTPUT_TOKENS": "200000"},
            {"claude-sonnet-5": 200000, "claude-haiku-5-5": 200000},
        ),
    ],
)
def test_the_policy_is_what_the_cli_sends_for_the_role(
    role_model: str | None, env: dict[str, str], allowed: dict[str, int]
) -> None:
    assert dict(model_policy(role_model, env).max_tokens) == allowed


def test_canonical_names_are_what_the_cli_sends() -> None:
    assert canonical("opus") == "claude-opus-5-5"
    assert canonical("claude-sonnet-4-5[1m]") == "claude-sonnet-4-5"
    assert canonical("claude-opus-4-1-20250805") == "claude-opus-5-5"
    assert set(CLI_MAX_TOKENS) >= {canonical(a) for a in ("opus", "sonnet", "haiku", "fable")}


# --- usage --------------------------------------------------------------------------------


def sse(event: str, data: dict[str, object]) -> bytes:
    return f"event: {event}\ndata: {json.dumps(data)}\n\n".encode()


STREAM = (
    sse(
        "message_start",
        {
            "type": "message_start",
            "message": {
                "id": "msg_1",
                "usage": {
                    "input_tokens": 1200,
                    "output_tokens": 1,
                    "cache_creation_input_tokens": 300,
                    "cache_read_input_tokens": 5000,
                    "cache_creation": {"ephemeral_1h_input_tokens": 100},
                },
            },
        },
    )
    + sse("content_block_delta", {"type": "content_block_delta", "delta": {"text": "message_"}})
    + sse("message_delta", {"type": "message_delta", "usage": {"output_tokens": 40}})
    + sse(
        "message_delta",
        {
            "type": "message_delta",
            "usage": {"output_tokens": 73, "server_tool_use": {"web_search_requests": 2}},
        },
    )
    + sse("message_stop", {"type": "message_stop"})
)
STREAM_USAGE = Usage(
    input_tokens=1200,
    output_tokens=73,
    cache_creation_input_tokens=300,
    cache_read_input_tokens=5000,
    cache_write_1h_tokens=100,
    web_search_requests=2,
)


@pytest.mark.parametrize("piece", [1, 7, 64, len(STREAM)])
def test_usage_is_read_from_a_stream_in_any_pieces(piece: int) -> None:
    reader = UsageReader(streamed=True)
    for at in range(0, len(STREAM), piece):
        reader.feed(STREAM[at : at + piece])

    assert reader.finish() == STREAM_USAGE


def chunked(data: bytes, size: int) -> bytes:
    parts = [data[at : at + size] for at in range(0, len(data), size)]
    return b"".join(b"%x;ext=1\r\n%s\r\n" % (len(p), p) for p in parts) + b"0\r\nX-T: 1\r\n\r\n"


@pytest.mark.parametrize(("chunk", "piece"), [(5, 3), (100, 1), (1000, 9), (37, 4096)])
def test_usage_is_read_through_chunked_framing(chunk: int, piece: int) -> None:
    framed = chunked(STREAM, chunk)
    reader = UsageReader(streamed=True, chunked=True)
    for at in range(0, len(framed), piece):
        reader.feed(framed[at : at + piece])

    assert reader.finish() == STREAM_USAGE


def test_usage_is_read_from_a_json_reply() -> None:
    reply = {"id": "msg_1", "usage": {"input_tokens": 10, "output_tokens": 20}}
    reader = UsageReader(streamed=False)
    reader.feed(json.dumps(reply).encode()[:5])
    reader.feed(json.dumps(reply).encode()[5:])

    assert reader.finish() == Usage(input_tokens=10, output_tokens=20)


@pytest.mark.parametrize(
    ("streamed", "data"),
    [(True, b"event: ping\ndata: {}\n\n"), (False, b"<html>"), (False, b'{"usage": 3}')],
)
def test_a_reply_without_usage_says_none(streamed: bool, data: bytes) -> None:
    reader = UsageReader(streamed=streamed)
    reader.feed(data)

    assert reader.finish() is None


def test_a_reply_that_cannot_be_read_says_none() -> None:
    reader = UsageReader(streamed=True, chunked=True)
    reader.feed(b"zz\r\n")

    assert reader.finish() is None


def test_the_worst_case_is_every_byte_a_token_and_all_the_output_asked_for() -> None:
    call = ModelCall("claude-opus-5-5", 128000, billed=True)

    assert worst_case(call, 4000) == Usage(input_tokens=4000, output_tokens=128000)


# --- prices -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("model", "usage", "cost"),
    [
        # What the CLI reported for the same usage (total_cost_usd), measured.
        ("claude-opus-5-5", Usage(input_tokens=6715, output_tokens=73), 0.02832),
        ("claude-sonnet-4-5", Usage(input_tokens=21896, output_tokens=73), 0.066783),
        ("claude-haiku-4-5", Usage(input_tokens=21895, output_tokens=73), 0.02226),
        ("claude-sonnet-5", Usage(input_tokens=21888, output_tokens=73), 0.044506),
        ("claude-sonnet-5-5", Usage(input_tokens=6740, output_tokens=73), 0.01421),
        ("claude-haiku-5-5", Usage(input_tokens=8219, output_tokens=73), 0.0008584),
        ("claude-mythos-5", Usage(input_tokens=1_000_000), 10.0),
        ("claude-opus-4-1", Usage(output_tokens=1_000_000), 75.0),
        ("claude-opus-4-5-20251101", Usage(output_tokens=1_000_000), 25.0),
        # Long prompts of haiku 5.5 cost more; so do cache writes and searches.
        ("claude-haiku-5-5", Usage(input_tokens=100_001), 0.0500005),
        (
            "claude-sonnet-4-5",
            Usage(
                cache_creation_input_tokens=1_000_000,
                cache_write_1h_tokens=400_000,
                cache_read_input_tokens=1_000_000,
                web_search_requests=3,
            ),
            0.6 * 3.75 + 0.4 * 6 + 0.3 + 0.03,
        ),
    ],
)
def test_prices_are_the_clis(model: str, usage: Usage, cost: float) -> None:
    assert price(model, usage) == pytest.approx(cost)


def test_unknown_models_are_priced_as_their_familys_dearest_or_the_dearest_of_all() -> None:
    assert prices_for("claude-opus-9") == prices_for("claude-opus-4-1")
    assert prices_for("claude-sonnet-9") == prices_for("claude-sonnet-4-5")
    assert prices_for("my-gateway-model").output == 75
    assert prices_for("claude-haiku-9").output == 5


# --- host names ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "host",
    ["pypi.org", "files.pythonhosted.org", "localhost", "a-b.c0.io", "127.0.0.1", "::1", "fe80::1"],
)
def test_host_names_and_ip_literals_are_valid(host: str) -> None:
    assert valid_host(host)


@pytest.mark.parametrize(
    "host",
    [
        "pypi.org/.evil.com",
        "pypi.org\\.evil.com",
        "pypi.org@evil.com",
        "pypi.org%2f.evil.com",
        "pypi.org .evil.com",
        "a..b",
        "-a.com",
        "a-.com",
        "a_b.com",
        "",
        "1.2.3",
        "2130706433",
        "0x7f000001",
        "127.1",
        "fe80::1%eth0",
        "x" * 64 + ".com",
        ("a." * 127) + "com",
    ],
)
def test_anything_else_is_no_host_name(host: str) -> None:
    assert not valid_host(host)
