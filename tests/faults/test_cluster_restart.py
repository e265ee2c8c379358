"""The bot restarted, or NATS away for longer than the limit, while its agent works on a
worker: the agent goes on, and its result reaches the thread once the bot (or NATS) is back,
once. Real processes: nats-server, ``harness worker``, ``harness bot --mode http``; the real
CLI against the scripted model."""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path

import pytest

from bot.testing.slack_emulator import SlackEmulator
from harness.project import load_project
from harness.testing.nats_server import NatsServer
from harness.testing.scripted_model import ScriptedModel
from harness.testing.workers import start_worker, worker_env
from tests.bot.conftest import BOT_TOKEN, SECRET, WAIT, bot_process, message_text
from tests.faults.nats_bot import HeldUntilReleased
from tests.faults.runs import stored_dispatches

pytestmark = [pytest.mark.anyio, pytest.mark.slow, pytest.mark.nats]


def texts(slack: SlackEmulator, channel: str, ts: str) -> list[str]:
    return [message_text(m) for m in slack.thread(channel, ts) if m.get("bot_id")]


@pytest.mark.parametrize("stop", [signal.SIGKILL, signal.SIGTERM])
async def test_the_result_of_an_agent_on_a_worker_reaches_the_thread_after_a_bot_restart(
    project_dir: Path, tmp_path: Path, stop: signal.Signals
) -> None:
    script = HeldUntilReleased()
    config = project_dir / "config.yaml"
    async with (
        NatsServer(tmp_path / "nats") as nats,
        ScriptedModel(script) as model,
        SlackEmulator(signing_secret=SECRET, bot_token=BOT_TOKEN) as slack,
    ):
        with config.open("a", encoding="utf-8") as file:
            file.write(f"\nruntime: {{kind: nats, url: '{nats.url}', lostAfterSeconds: 5}}\n")
        worker = await start_worker("w1", nats.url, worker_env(model.env()), tmp_path)
        try:
            env = {
                **worker_env({}),
                "SLACK_BOT_TOKEN": BOT_TOKEN,
                "SLACK_SIGNING_SECRET": SECRET,
                "SLACK_API_URL": slack.api_url,
            }
            async with bot_process(config, slack, env) as bot:
                asked = (await slack.user_message("U1", "D1", "fix it remotely")).event["ts"]
                await model.wait_for_request(timeout=WAIT)  # at work on the worker
                bot.send_signal(stop)
                await bot.wait()

            async with bot_process(config, slack, env):
                script.release.set()
                done = await slack.wait_for(
                    lambda: [t for t in texts(slack, "D1", asked) if t.startswith("✅")] or None,
                    WAIT,
                )
                await slack.wait_for(
                    lambda: "white_check_mark" in slack.reactions("D1", asked) or None, WAIT
                )
        finally:
            if worker.returncode is None:
                worker.terminate()
            await worker.wait()

    assert "Done: fix it remotely" in done[0]
    assert len(done) == 1
    assert len(script.sessions) == 1  # the same run, never started again
    assert not [t for t in texts(slack, "D1", asked) if "is working…" in t]


async def test_a_result_finished_during_a_nats_outage_longer_than_the_limit_reaches_the_thread(
    project_dir: Path, tmp_path: Path
) -> None:
    """nats-server away for longer than ``lostAfterSeconds`` while the agent finishes on its
    worker: nobody is told it was interrupted; once NATS is back, its result reaches task.json
    and the thread, once."""
    script = HeldUntilReleased()
    config = project_dir / "config.yaml"
    async with (
        NatsServer(tmp_path / "nats") as nats,
        ScriptedModel(script) as model,
        SlackEmulator(signing_secret=SECRET, bot_token=BOT_TOKEN) as slack,
    ):
        with config.open("a", encoding="utf-8") as file:
            file.write(f"\nruntime: {{kind: nats, url: '{nats.url}', lostAfterSeconds: 5}}\n")
        worker = await start_worker("w1", nats.url, worker_env(model.env()), tmp_path)
        try:
            env = {
                **worker_env({}),
                "SLACK_BOT_TOKEN": BOT_TOKEN,
                "SLACK_SIGNING_SECRET": SECRET,
                "SLACK_API_URL": slack.api_url,
            }
            async with bot_process(config, slack, env):
                asked = (await slack.user_message("U1", "D1", "fix it remotely")).event["ts"]
                await model.wait_for_request(timeout=WAIT)  # at work on the worker
                await nats.stop()
                script.release.set()  # it finishes while nobody can hear it
                await asyncio.sleep(7.5)  # the outage itself, longer than the limit
                await nats.start()
                done = await slack.wait_for(
                    lambda: [t for t in texts(slack, "D1", asked) if t.startswith("✅")] or None,
                    WAIT,
                )
                await slack.wait_for(
                    lambda: "white_check_mark" in slack.reactions("D1", asked) or None, WAIT
                )
        finally:
            if worker.returncode is None:
                worker.terminate()
            await worker.wait()

    tasks_dir = load_project(config).config.tasks_dir
    [dispatch] = stored_dispatches(tasks_dir)
    assert dispatch["status"] == "completed"
    assert "Done: fix it remotely" in dispatch["result"]["summary"]
    assert len(done) == 1 and "Done: fix it remotely" in done[0]
    assert not [t for t in texts(slack, "D1", asked) if "interrupted" in t]
