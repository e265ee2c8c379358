"""The bot restarted, or NATS away for longer than the limit, while its agent works on a
worker: the agent goes on, and its result reaches the thread once the bot (or NATS) is back,
once. Real processes: nats-server, ``harness worker``, ``harness bot --mode http``; the real
CLI against the scripted model."""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path

import pytest

from tests.bot.conftest import WAIT, bot_process
from tests.faults.nats_bot import HeldUntilReleased, nats_bot

pytestmark = [pytest.mark.anyio, pytest.mark.slow, pytest.mark.nats, pytest.mark.waits]


@pytest.mark.parametrize("stop", [signal.SIGKILL, signal.SIGTERM])
async def test_the_result_of_an_agent_on_a_worker_reaches_the_thread_after_a_bot_restart(
    project_dir: Path, tmp_path: Path, stop: signal.Signals
) -> None:
    script = HeldUntilReleased()
    async with nats_bot(project_dir, tmp_path, script, lost_after=5) as c:
        worker = await c.worker()
        try:
            async with bot_process(c.config, c.slack, c.env) as bot:
                asked = (await c.slack.user_message("U1", "D1", "fix it remotely")).event["ts"]
                await c.model.wait_for_request(timeout=WAIT)  # at work on the worker
                bot.send_signal(stop)
                await bot.wait()

            async with bot_process(c.config, c.slack, c.env):
                script.release.set()
                done = await c.slack.wait_for(
                    lambda: [t for t in c.said("D1", asked, "") if t.startswith("✅")] or None,
                    WAIT,
                )
                await c.slack.wait_for(
                    lambda: "white_check_mark" in c.slack.reactions("D1", asked) or None, WAIT
                )
        finally:
            await worker.stop()

        assert "Done: fix it remotely" in done[0]
        assert len(done) == 1
        assert len(script.sessions) == 1  # the same run, never started again
        assert not c.said("D1", asked, "is working…")


async def test_a_result_finished_during_a_nats_outage_longer_than_the_limit_reaches_the_thread(
    project_dir: Path, tmp_path: Path
) -> None:
    """nats-server away for longer than ``lostAfterSeconds`` while the agent finishes on its
    worker: nobody is told it was interrupted; once NATS is back, its result reaches task.json
    and the thread, once."""
    script = HeldUntilReleased()
    async with nats_bot(project_dir, tmp_path, script, lost_after=5) as c:
        worker = await c.worker()
        try:
            async with bot_process(c.config, c.slack, c.env):
                asked = (await c.slack.user_message("U1", "D1", "fix it remotely")).event["ts"]
                await c.model.wait_for_request(timeout=WAIT)  # at work on the worker
                await c.nats.stop()
                script.release.set()  # it finishes while nobody can hear it
                await asyncio.sleep(7.5)  # the outage itself, longer than the limit
                await c.nats.start()
                done = await c.slack.wait_for(
                    lambda: [t for t in c.said("D1", asked, "") if t.startswith("✅")] or None,
                    WAIT,
                )
                await c.slack.wait_for(
                    lambda: "white_check_mark" in c.slack.reactions("D1", asked) or None, WAIT
                )
        finally:
            await worker.stop()

        [dispatch] = c.dispatches()
        assert dispatch["status"] == "completed"
        result = dispatch["result"]
        assert isinstance(result, dict) and "Done: fix it remotely" in result["summary"]
        assert len(done) == 1 and "Done: fix it remotely" in done[0]
        assert not c.said("D1", asked, "interrupted")
