"""A ``harness worker --health-port`` serves /healthz, /readyz (ready while NATS is
connected) and /metrics, as the bot does. A real nats-server, the worker in this process."""

from __future__ import annotations

from pathlib import Path

import aiohttp
import pytest

from harness.runtime.claude import ClaudeRuntime
from harness.testing.nats_server import NatsServer
from harness.testing.workers import worker_in_process

pytestmark = [pytest.mark.anyio, pytest.mark.nats]


async def get(port: int, path: str) -> tuple[int, str]:
    async with (
        aiohttp.ClientSession() as session,
        session.get(f"http://127.0.0.1:{port}{path}") as response,
    ):
        return response.status, await response.text()


async def test_a_worker_with_a_health_port_says_it_is_ready_while_nats_is_there(
    tmp_path: Path,
) -> None:
    async with (
        NatsServer(tmp_path / "nats") as server,
        worker_in_process(server.url, ClaudeRuntime(), tmp_path / "worker", health_port=0) as (
            worker,
            _,
        ),
    ):
        assert worker.health_port not in (None, 0)
        port = worker.health_port
        assert await get(port, "/healthz") == (200, "ok")
        assert await get(port, "/readyz") == (200, "ready\n")
        status, metrics = await get(port, "/metrics")
        assert status == 200 and "harness_agents" in metrics
