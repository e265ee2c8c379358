"""Model calls made around the CLI from inside the OS sandbox, as a prompt-injected agent would
make them: another model, more output tokens, other paths and methods of the model API, a
flood of connections, names that are no host names. Real parts, as in ``test_escapes.py``: the
Claude Code CLI in real bubblewrap against the scripted model, in this process and on a
``harness worker`` over NATS (the ``rig`` fixture); every tool call approved."""

from __future__ import annotations

import ast
import asyncio
import contextlib
import os
from collections.abc import AsyncIterator

import pytest

from tests.harness.sandbox.conftest import Rig

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

# The bridge's loopback URL inside: the CLI's model API and every program's proxy.
URL = '"${ANTHROPIC_BASE_URL:-$HTTP_PROXY}"'
CURL = "curl -sS --max-time 20 -w ' status=%{http_code}' -H 'content-type: application/json'"
CLI_MODEL = "claude-opus-5-5"  # what the CLI sends for a role that names none


def messages(model: str, max_tokens: int, text: str = "hi") -> str:
    return (
        f'{{"model": "{model}", "max_tokens": {max_tokens}, '
        f'"messages": [{{"role": "user", "content": "{text}"}}]}}'
    )


def big_call(*, stream: bool) -> str:
    """A command that calls the model from inside with a prompt of ~400 kB: ~100,000 input
    tokens as the scripted model counts them (4 bytes a token), $0.40 at the CLI's model."""
    body = (
        f"{{'model': '{CLI_MODEL}', 'max_tokens': 16, 'stream': {stream}, "
        "'messages': [{'role': 'user', 'content': 'x ' * 200000}]}"
    )
    return (
        f'python3 -c "import json; print(json.dumps({body}))" > /tmp/big.json && '
        f"{CURL} {URL}/v1/messages?beta=true -d @/tmp/big.json | tail -c 300"
    )


async def test_calls_around_the_cli_are_refused_and_never_reach_the_model(rig: Rig) -> None:
    outcome, results = await rig.run(
        f"{CURL} {URL}/v1/messages -d '{messages('claude-mythos-5-2', 100)}'",
        f"{CURL} {URL}/v1/messages?beta=true -d '{messages(CLI_MODEL, 1_000_000)}'",
        f"{CURL} {URL}/v1/models",
        f"{CURL} -X DELETE {URL}/v1/files/file_1",
        f"{CURL} {URL}/v1/messages/batches -d '{{\"requests\": []}}'",
        f"{CURL} -X TRACE {URL}/v1/messages",
        f"{CURL} {URL}/v1/organizations/me",
    )

    assert outcome.status == "completed", outcome.error
    assert "status=400" in results[0] and "claude-mythos-5-2" in results[0]
    assert "status=400" in results[1] and "max_tokens 1000000" in results[1]
    for said in results[2:]:  # the proxy's own answer: the scripted model never says 403
        assert "status=403" in said and "harness sandbox" in said and "not a model call" in said
    bodies = [request.body for request in rig.model.requests]
    assert all(body.get("model") == CLI_MODEL for body in bodies)
    assert all(body.get("max_tokens") == 128000 for body in bodies)
    assert all("metadata" in body for body in bodies)  # the CLI's own turns only


async def test_a_model_call_made_around_the_cli_is_counted_in_the_runs_cost(rig: Rig) -> None:
    # ~100,000 input tokens as the scripted model counts them (4 bytes a token): $0.40.
    big = big_call(stream=True)

    outcome, results = await rig.run(big)

    assert outcome.status == "completed", outcome.error
    assert "status=200" in results[0] and "message_stop" in results[0]
    # The CLI's own two turns cost a few cents; the call it never saw, $0.40 more.
    assert outcome.cost_usd is not None and outcome.cost_usd >= 0.40


async def test_once_the_counted_cost_reaches_the_budget_no_model_call_is_made(rig: Rig) -> None:
    big = big_call(stream=False)
    before = len(rig.model.requests)

    outcome, _ = await rig.run(big, "echo never", budget=0.25)

    assert outcome.status == "failed" and outcome.error is not None
    assert "budget ($0.25) is spent" in outcome.error
    assert outcome.cost_usd is not None and outcome.cost_usd >= 0.40
    # The CLI's first turn and the call around it; its next turn was refused, not retried.
    assert len(rig.model.requests) - before == 2


FLOOD = r"""
import os, socket, sys, time
port = int(os.environ.get("ANTHROPIC_BASE_URL", os.environ.get("HTTP_PROXY")).rsplit(":", 1)[1])
held = []
for _ in range(1100):
    held.append(socket.create_connection(("127.0.0.1", port), 10))
answers = {"429": 0, "closed": 0, "open": 0}
deadline = time.monotonic() + 40
for sock in held:
    sock.settimeout(max(0.01, deadline - time.monotonic()))
    try:
        data = sock.recv(4096)
    except socket.timeout:
        answers["open"] += 1
        continue
    except OSError:
        data = b""
    answers["429" if b" 429 " in data[:20] else "closed"] += 1
print(answers)
"""


@contextlib.asynccontextmanager
async def most_fds() -> AsyncIterator[list[int]]:
    """The most file descriptors this process had open meanwhile (sampled), in ``[0]``."""
    most = [len(os.listdir("/proc/self/fd"))]
    stop = asyncio.Event()

    async def sample() -> None:
        while not stop.is_set():
            most[0] = max(most[0], len(os.listdir("/proc/self/fd")))
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), 0.01)

    sampler = asyncio.create_task(sample())
    try:
        yield most
    finally:
        stop.set()
        await sampler


async def test_a_flood_of_connections_from_inside_leaves_the_harness_serving(rig: Rig) -> None:
    before = len(os.listdir("/proc/self/fd"))
    async with most_fds() as most:
        outcome, results = await rig.run(f"python3 - <<'EOF'\n{FLOOD}\nEOF", "echo 'the next turn'")

    assert outcome.status == "completed", outcome.error  # its next turns were served
    assert most[0] - before < 300  # 1,100 held connections would have held 1,100 or more
    counts = ast.literal_eval(results[0].strip())  # {'429': n, 'closed': n, 'open': n}
    assert counts["open"] == 0 and counts["429"] >= 1000  # answered at once, or let go
    assert results[1].strip() == "the next turn"


async def test_a_name_that_is_no_host_name_is_refused_and_never_asked(rig: Rig) -> None:
    connect = (
        "python3 -c \"import os, socket; url = os.environ.get('HTTP_PROXY'); "
        "s = socket.create_connection(('127.0.0.1', int(url.rsplit(':', 1)[1])), 10); "
        "s.sendall(b'CONNECT {} HTTP/1.1\\r\\n\\r\\n'); print(s.recv(4096).decode())\""
    )
    outcome, results = await rig.run(
        connect.format("pypi.org/.evil.com:443"), connect.format("1.2.3:443")
    )

    assert outcome.status == "completed", outcome.error
    for said in results:
        assert said.startswith("HTTP/1.1 400") and "is not a host name" in said
    assert rig.gateway.fetches == []
