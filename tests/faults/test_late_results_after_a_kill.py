"""A bot killed after a late result was stored and before its thread was owed it: the next
bot tells the thread, once. The agent's worker is judged lost (cut off from NATS longer than
``lostAfterSeconds``), its thread is told it was interrupted, the worker's link comes back
with the result; the bot is held in the middle of announcing it (Slack does not answer the
look for the interruption notice) and SIGKILLed there, after task.json took the result.
Real processes: nats-server, ``harness worker``, ``harness bot --mode http``; the real CLI
against the scripted model, the Slack emulator."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from tests.bot.conftest import WAIT, bot_process
from tests.faults.cuttable_proxy import CuttableProxy
from tests.faults.nats_bot import HeldUntilReleased, nats_bot

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.slow,
    pytest.mark.nats,
    pytest.mark.subprocess,
    pytest.mark.waits,
]

LOST_AFTER = 3.0  # a few heartbeats (one a second) of a loaded machine


async def test_a_late_result_whose_announcement_a_kill_cut_short_is_told_once_after_the_restart(
    project_dir: Path, tmp_path: Path
) -> None:
    script = HeldUntilReleased()
    async with (
        nats_bot(project_dir, tmp_path, script, lost_after=LOST_AFTER) as c,
        CuttableProxy(c.nats.port) as proxy,
    ):
        worker = await c.worker(proxy.url)
        try:
            async with bot_process(c.config, c.slack, c.env) as bot:
                asked = (await c.slack.user_message("U1", "D1", "fix it remotely")).event["ts"]
                await c.model.wait_for_request(timeout=WAIT)  # at work on the worker
                await proxy.cut()
                await c.until_said("D1", asked, "was interrupted")
                # Announcing the result, the bot looks for the notice in the thread: it
                # waits there, the result already in task.json, when it is killed.
                c.slack.faults.stall("conversations.replies")
                script.release.set()
                await proxy.restore()

                def held_after_storing() -> bool:
                    if "conversations.replies" not in c.slack.faults.waiting:
                        return False
                    return [d["status"] for d in c.dispatches()] == ["completed"]

                await c.slack.wait_for(held_after_storing, WAIT)
                bot.send_signal(signal.SIGKILL)
                await bot.wait()
            c.slack.faults.unstall()

            async with bot_process(c.config, c.slack, c.env):
                await c.until_said("D1", asked, "finished after all")
                await c.until_said("D1", asked, "Done: fix it remotely")
                await c.slack.wait_for(
                    lambda: "white_check_mark" in c.slack.reactions("D1", asked) or None, WAIT
                )
                late = c.said("D1", asked, "finished after all")
                results = c.said("D1", asked, "Done: fix it remotely")
                interrupted = c.said("D1", asked, "was interrupted")
        finally:
            await worker.stop()

    assert len(late) == 1 and len(results) == 1
    assert interrupted == []  # the result took the notice's place
    assert len(script.sessions) == 1  # the same run, never started again
