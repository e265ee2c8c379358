"""Clients of ``harness mcp --transport http`` that drop their connection in the middle of a
call: while its request is still arriving (a client killed as it sends), or while a long
call (``await_agent`` on an agent at work) streams. The server says one line about it, logs
no traceback, and goes on serving the next client. Both wire protocols: the one-request
exchange of 2026-07-28 and the sessions of 2025-06-18."""

from __future__ import annotations

import asyncio
import contextlib
import json
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import aiohttp
import anyio
import pytest
from starlette.requests import ClientDisconnect

from harness.mcp_server.disconnects import only_disconnects
from harness.testing.scripted_model import ScriptedModel, Turn
from tests.harness.mcp_server.conftest import ALICE, TOKEN_OF, call, connect
from tests.harness.mcp_server.test_http_process import harness_mcp_http

pytestmark = [pytest.mark.anyio]

WAIT = 30.0
MODERN, SESSIONS = "2026-07-28", "2025-06-18"
HEADERS = {
    "Authorization": f"Bearer {TOKEN_OF[ALICE]}",
    "Accept": "application/json, text/event-stream",
    "Content-Type": "application/json",
}


def rpc(method: str, params: dict[str, Any], request_id: int | None = None) -> dict[str, Any]:
    message: dict[str, Any] = {"jsonrpc": "2.0", "method": method, "params": params}
    return message if request_id is None else {**message, "id": request_id}


async def wire_headers(url: str, protocol: str) -> dict[str, str]:
    """The headers a call of ``protocol`` carries (with 2025-06-18: a session, opened)."""
    headers = {**HEADERS, "mcp-protocol-version": protocol}
    if protocol == MODERN:
        return headers
    hello = rpc(
        "initialize",
        {"protocolVersion": protocol, "capabilities": {},
         "clientInfo": {"name": "dropper", "version": "0"}},
        1,
    )  # fmt: skip
    async with aiohttp.ClientSession() as http:
        async with http.post(url, json=hello, headers=HEADERS) as response:
            assert response.status == 200, await response.text()
            headers["mcp-session-id"] = response.headers["mcp-session-id"]
            await response.read()
        initialized = rpc("notifications/initialized", {})
        async with http.post(url, json=initialized, headers=headers) as done:
            assert done.status == 202
    return headers


async def drop_while_sending(url: str, headers: dict[str, str], call: dict[str, Any]) -> None:
    """Sends the call's headers and half its body, then the connection goes."""
    parts = urlsplit(url)
    assert parts.hostname is not None and parts.port is not None
    body = json.dumps(call).encode()
    head = "".join(f"{k}: {v}\r\n" for k, v in headers.items())
    _, writer = await asyncio.open_connection(parts.hostname, parts.port)
    writer.write(
        f"POST {parts.path} HTTP/1.1\r\nHost: {parts.netloc}\r\n{head}"
        f"Content-Length: {len(body)}\r\n\r\n".encode()
        + body[: len(body) // 2]
    )
    await writer.drain()
    writer.transport.abort()


async def drop_while_streaming(url: str, headers: dict[str, str], call: dict[str, Any]) -> None:
    """Sends the call, reads the start of its answer's event stream, and closes it."""
    if headers["mcp-protocol-version"] == MODERN:  # the SDK's client: a cancel closes it
        heard = asyncio.Event()

        async def progress(progress: float, total: float | None, message: str | None) -> None:
            heard.set()

        async with connect(url, ALICE) as client:
            waiting = asyncio.ensure_future(
                client.call_tool("await_agent", call["params"]["arguments"],
                                 progress_callback=progress)
            )  # fmt: skip
            await asyncio.wait_for(heard.wait(), WAIT)  # the call is under way
            waiting.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await waiting
        return
    async with aiohttp.ClientSession() as http:
        response = await http.post(url, json=call, headers=headers)
        assert response.status == 200
        assert response.content_type == "text/event-stream"
        await asyncio.wait_for(response.content.readline(), WAIT)  # the call is under way
        response.close()


@pytest.mark.slow
@pytest.mark.subprocess
@pytest.mark.parametrize("protocol", [MODERN, SESSIONS])
async def test_clients_dropping_mid_call_leave_no_traceback_and_the_next_is_served(
    project_dir: Path, protocol: str
) -> None:
    config = project_dir / "config.yaml"
    with config.open("a", encoding="utf-8") as file:
        file.write(f"\nmcpServer: {{tokens: [{{user: {ALICE}, tokenEnv: ALICE_TOKEN}}]}}\n")
    async with ScriptedModel(lambda request: Turn(stall_seconds=60)) as model:
        env = {**model.env(), "ALICE_TOKEN": TOKEN_OF[ALICE]}
        async with harness_mcp_http(config, env) as (server, url):
            async with connect(url, ALICE) as client:
                started = await call(client, "start_task", request="a long job")
                await model.wait_for_request(timeout=WAIT)  # the agent is at work
            agent_id = started["agentId"]
            waits = rpc(
                "tools/call",
                {"name": "await_agent", "arguments": {"agentId": agent_id},
                 "_meta": {"progressToken": "p1"}},
                2,
            )  # fmt: skip
            headers = await wire_headers(url, protocol)
            await drop_while_sending(url, headers, waits)
            await drop_while_streaming(url, headers, waits)

            async with connect(url, ALICE) as client:  # the next client, while the call ends
                await call(client, "kill_agent", agentId=agent_id)
                ended = await call(client, "await_agent", agentId=agent_id)
            server.terminate()
            _, rest = await asyncio.wait_for(server.communicate(), WAIT)
    log = rest.decode()
    assert ended["status"] == "killed"
    assert "Traceback" not in log, log
    assert "ERROR" not in log, log
    assert f"MCP client of {ALICE} went away before its request to /mcp arrived whole" in log


def test_only_a_client_going_away_counts_as_one() -> None:
    assert only_disconnects(ClientDisconnect())
    assert only_disconnects(ExceptionGroup("x", [anyio.ClosedResourceError(), ClientDisconnect()]))
    assert not only_disconnects(ExceptionGroup("x", [anyio.BrokenResourceError(), KeyError()]))
    assert not only_disconnects(RuntimeError("a real failure"))
