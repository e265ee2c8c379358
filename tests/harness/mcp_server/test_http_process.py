"""``harness mcp --transport http`` as people run it: a process that says where it serves,
takes its tokens from config.yaml and the environment, and on SIGTERM stops the agents it
started (they end interrupted) before it exits."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from harness.project import build_orchestrator, load_project
from harness.testing import spawn
from harness.testing.scripted_model import ScriptedModel, Turn
from tests.harness.mcp_server.conftest import ALICE, TOKEN_OF, call, connect

pytestmark = [pytest.mark.anyio, pytest.mark.subprocess]

WAIT = 30.0


@contextlib.asynccontextmanager
async def harness_mcp_http(
    config: Path, env: dict[str, str]
) -> AsyncIterator[tuple[asyncio.subprocess.Process, str]]:
    server = await spawn.create_subprocess_exec(
        *(sys.executable, "-m", "harness", "mcp", "--config", str(config)),
        *("--transport", "http", "--port", "0"),
        env={**os.environ, **env},
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
    )
    assert server.stderr is not None
    try:
        line = b""
        while b"serving http" not in line:
            line = await asyncio.wait_for(server.stderr.readline(), WAIT)
            assert line, "harness mcp exited before serving"
        yield server, line.decode().split("serving ", 1)[1].split()[0]
    finally:
        if server.returncode is None:
            server.kill()
            await server.wait()


@pytest.mark.slow
async def test_sigterm_stops_the_agents_it_started_and_keeps_their_records(
    project_dir: Path,
) -> None:
    config = project_dir / "config.yaml"
    with config.open("a", encoding="utf-8") as file:
        file.write(f"\nmcpServer: {{tokens: [{{user: {ALICE}, tokenEnv: ALICE_TOKEN}}]}}\n")
    async with ScriptedModel(lambda request: Turn(stall_seconds=60)) as model:
        env = {**model.env(), "ALICE_TOKEN": TOKEN_OF[ALICE]}
        async with harness_mcp_http(config, env) as (server, url):
            assert url.endswith("/mcp")
            async with connect(url, ALICE) as client:
                started = await call(client, "start_task", request="a long job")
                await model.wait_for_request(timeout=WAIT)  # the agent is at work
            server.send_signal(signal.SIGTERM)
            assert await asyncio.wait_for(server.wait(), WAIT) == 0
    store = build_orchestrator(load_project(config))
    record = await store.record(started["agentId"])
    await store.shutdown()
    assert record.status == "interrupted"


async def test_without_its_tokens_variable_it_does_not_start_and_says_which(
    project_dir: Path,
) -> None:
    config = project_dir / "config.yaml"
    with config.open("a", encoding="utf-8") as file:
        file.write(f"\nmcpServer: {{tokens: [{{user: {ALICE}, tokenEnv: NOT_SET_HERE}}]}}\n")
    done = await spawn.create_subprocess_exec(
        *(sys.executable, "-m", "harness", "mcp", "--config", str(config)),
        *("--transport", "http", "--port", "0"),
        env={k: v for k, v in os.environ.items() if k != "NOT_SET_HERE"},
        stderr=asyncio.subprocess.PIPE,
    )
    _, err = await asyncio.wait_for(done.communicate(), WAIT)
    assert done.returncode == 2
    assert "mcpServer.tokens[0].tokenEnv: $NOT_SET_HERE is not set" in err.decode()
