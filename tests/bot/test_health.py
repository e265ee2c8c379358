"""/healthz, /readyz and /metrics of the bot (HTTP mode: beside /slack/events) and of a
worker (``--health-port``), scraped during real runs; /readyz following Slack's Socket Mode
connection and the NATS server of ``runtime: nats`` as they go away and come back."""

from __future__ import annotations

import asyncio
from pathlib import Path

import aiohttp
import pytest
from prometheus_client.parser import text_string_to_metric_families

from bot.testing.slack_emulator import SlackEmulator
from harness.agents.orchestrator import Orchestrator
from harness.project import Project, build_orchestrator
from harness.runtime.nats_hosting import NatsHosting
from harness.runtime.nats_link import NatsSettings
from harness.runtime.worker import Worker
from harness.testing.held_runtime import HeldRuntime
from harness.testing.nats_server import NatsServer
from harness.testing.workers import worker_env
from tests.bot.conftest import BOT_TOKEN, SECRET, Rig, RigFactory, bot_process
from tests.faults.test_unwritable_task_folder import frozen

pytestmark = pytest.mark.anyio

WAIT = 10.0


async def get(url: str) -> tuple[int, str]:
    async with aiohttp.ClientSession() as session, session.get(url) as response:
        return response.status, await response.text()


def value(text: str, name: str, **labels: str) -> float:
    """The sample ``name{labels}`` of a /metrics page; 0 when absent (as Prometheus reads a
    label set not seen yet)."""
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name and sample.labels == labels:
                return float(sample.value)
    return 0.0


def base(r: Rig) -> str:
    return r.server.url.removesuffix("/slack/events")


async def until(url: str, status: int, timeout: float = WAIT) -> str:
    """The body ``url`` answers once its status is ``status``; polled, as a load balancer
    does (/readyz has nothing to wait on)."""
    async with asyncio.timeout(timeout):
        while (answer := await get(url))[0] != status:
            await asyncio.sleep(0.05)
    return answer[1]


async def test_the_bots_metrics_follow_an_agent_and_the_requests(rig: RigFactory) -> None:
    async with rig(runtime=HeldRuntime()) as r:
        assert await get(f"{base(r)}/healthz") == (200, "ok")
        assert await get(f"{base(r)}/readyz") == (200, "ready\n")
        _, before = await get(f"{base(r)}/metrics")
        assert value(before, "harness_agents_running", role="developer") == 0

        r.slack.faults.fail_next("reactions.add", status=200, error="channel_not_found")  # the 👀
        sent = await r.say("fix the login bug")
        await r.held.wait_started(1, WAIT)
        _, during = await get(f"{base(r)}/metrics")
        assert value(during, "harness_agents_running", role="developer") == 1
        assert value(during, "harness_agents_queued", role="developer") == 0
        assert value(during, "harness_slack_requests_total", kind="event message", decision="new")
        assert value(during, "harness_slack_ack_latency_seconds_count") >= 1
        assert value(during, "harness_questions_waiting", kind="approval") == 0

        r.held.release()
        assert await r.final_reaction("D1", sent.event["ts"], WAIT) == "white_check_mark"
        _, after = await get(f"{base(r)}/metrics")
        assert value(after, "harness_agents_running", role="developer") == 0
        done = {"role": "developer", "status": "completed"}
        assert value(after, "harness_agent_duration_seconds_count", **done) == 1
        assert value(after, "harness_agent_cost_usd_total", **done) == pytest.approx(0.01)
        # The outbox forgets a delivered entry just after Slack took its last call.
        async with asyncio.timeout(WAIT):
            while value((await get(f"{base(r)}/metrics"))[1], "harness_undelivered_posts"):
                await asyncio.sleep(0.02)
        assert value(after, "harness_slack_api_errors_total", method="reactions.add") == 1
        assert value(after, "harness_slack_api_errors_total", method="chat.postMessage") == 0


async def test_readyz_fails_while_the_task_store_cannot_be_written(
    rig: RigFactory, project: Project
) -> None:
    async with rig(runtime=HeldRuntime()) as r:
        assert (await get(f"{base(r)}/readyz"))[0] == 200
        with frozen(project.config.tasks_dir):
            status, text = await get(f"{base(r)}/readyz")
            healthz = await get(f"{base(r)}/healthz")
        assert status == 503
        assert text.startswith("task store: ") and "not writable" in text
        assert len(text.strip().splitlines()) == 1  # Slack and the runtime are fine
        assert healthz == (200, "ok")  # serving still
        assert await get(f"{base(r)}/readyz") == (200, "ready\n")


async def test_socket_mode_serves_them_on_the_health_port(rig: RigFactory) -> None:
    async with rig(runtime=HeldRuntime(), mode="socket", health_port=0) as r:
        url = f"http://127.0.0.1:{r.server.health_port}"
        assert r.server.health_port
        assert await get(f"{url}/healthz") == (200, "ok")
        assert await get(f"{url}/readyz") == (200, "ready\n")
        sent = await r.say("fix the login bug")
        await r.held.wait_started(1, WAIT)
        _, during = await get(f"{url}/metrics")
        assert value(during, "harness_agents_running", role="developer") == 1
        r.held.release()
        assert await r.final_reaction("D1", sent.event["ts"], WAIT) == "white_check_mark"


@pytest.mark.waits
async def test_in_socket_mode_readyz_fails_while_slack_is_away_and_recovers_on_reconnection(
    rig: RigFactory,
) -> None:
    async with rig(runtime=HeldRuntime(), mode="socket", health_port=0) as r:
        readyz = f"http://127.0.0.1:{r.server.health_port}/readyz"
        assert await get(readyz) == (200, "ready\n")

        await r.slack.stop()  # its websocket closed, and no new one until Slack is back
        assert await until(readyz, 503) == "slack: Socket Mode not connected\n"
        assert (await get(readyz))[0] == 503  # not a blip: still down

        await r.slack.start()
        # slack_sdk reconnects by itself, trying again every ping interval (5 s) at worst.
        assert await until(readyz, 200, timeout=3 * WAIT) == "ready\n"
        assert r.slack.socket_connections == 2
        sent = await r.say("fix the login bug")  # the new connection carries events
        await r.held.wait_started(1, WAIT)
        assert sent.acked
        r.held.release()


@pytest.mark.nats
async def test_the_bots_readyz_follows_the_nats_server_of_its_runtime(
    project_dir: Path, tmp_path: Path, slack: SlackEmulator
) -> None:
    config = project_dir / "config.yaml"
    env = {
        **worker_env({}),
        "SLACK_BOT_TOKEN": BOT_TOKEN,
        "SLACK_SIGNING_SECRET": SECRET,
        "SLACK_API_URL": slack.api_url,
    }
    async with NatsServer(tmp_path / "nats") as nats:
        with config.open("a", encoding="utf-8") as file:
            file.write(f"\nruntime: {{kind: nats, url: '{nats.url}'}}\n")
        async with bot_process(config, slack, env):
            assert slack.bot_url is not None  # where the bot listens
            readyz = slack.bot_url.removesuffix("/slack/events") + "/readyz"
            assert await get(readyz) == (200, "ready\n")  # before any agent ran

            await nats.stop()
            text = await until(readyz, 503)
            assert text == f"runtime: NATS at {nats.url} not connected\n"


@pytest.mark.nats
async def test_a_workers_health_port_serves_its_agents_and_nats(
    project: Project, tmp_path: Path
) -> None:
    held = HeldRuntime()
    async with NatsServer(tmp_path / "nats") as server:
        settings = NatsSettings(server.url)
        worker = Worker(
            settings, held, name="w1", slots=1, workspaces=tmp_path / "ws", health_port=0
        )
        stop, ready = asyncio.Event(), asyncio.Event()
        serving = asyncio.ensure_future(worker.serve(stop, ready=ready.set))
        hosting = NatsHosting(settings)
        orchestrator: Orchestrator = build_orchestrator(project, hosting)
        try:
            await asyncio.wait_for(ready.wait(), WAIT)
            url = f"http://127.0.0.1:{worker.health_port}"
            assert await get(f"{url}/healthz") == (200, "ok")
            assert await get(f"{url}/readyz") == (200, "ready\n")

            handle = await orchestrator.draft("developer", "fix the login bug")
            await held.wait_started(1, WAIT)
            _, during = await get(f"{url}/metrics")
            assert value(during, "harness_agents_running", role="developer") == 1
            held.release()
            await orchestrator.wait(handle.agent_id, WAIT)
            _, after = await get(f"{url}/metrics")
            assert value(after, "harness_agents_running", role="developer") == 0
            done = {"role": "developer", "status": "completed"}
            assert value(after, "harness_agent_duration_seconds_count", **done) == 1

            await server.stop()
            status, text = await get(f"{url}/readyz")
            assert status == 503 and text.startswith("nats: not connected")
        finally:
            await orchestrator.shutdown()
            await hosting.close()
            stop.set()
            await asyncio.wait_for(serving, WAIT)
