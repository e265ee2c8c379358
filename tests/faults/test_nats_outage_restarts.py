"""What is owed across a NATS outage survives the restart of the process that owes it. The
bot restarted after it judged a cut-off worker lost: the late result still replaces the
interruption in the thread, once, also when the bot was killed while it announced the result
(after task.json took it). The bot stopped after a kill it could not deliver: the
next bot delivers it, and the worker's CLI stops. A worker stopped (SIGTERM) during an
outage after its agent finished: the next worker with its workspaces publishes the result,
and the thread gets it once. Real processes: nats-server, ``harness worker``, ``harness bot
--mode http``; the real CLI against the scripted model."""

from __future__ import annotations

import asyncio
import contextlib
import signal
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from harness.testing.processes import claude_children
from harness.testing.scripted_model import Turn
from tests.bot.conftest import WAIT, bot_process
from tests.faults.cuttable_proxy import CuttableProxy
from tests.faults.nats_bot import HeldUntilReleased, NatsBot, nats_bot

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.slow,
    pytest.mark.nats,
    pytest.mark.subprocess,
    pytest.mark.waits,
]

LOST_AFTER = 3.0  # a few heartbeats (one a second) of a loaded machine


@dataclass
class JudgedLost:
    c: NatsBot
    proxy: CuttableProxy
    script: HeldUntilReleased  # the agent works until it is released
    bot: asyncio.subprocess.Process
    asked: str  # the DM's ts


@contextlib.asynccontextmanager
async def judged_lost(project_dir: Path, tmp_path: Path) -> AsyncIterator[JudgedLost]:
    """A DM's agent at work on a worker whose link to NATS is cut until the bot (a process,
    still running) told the thread the agent was interrupted."""
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
                yield JudgedLost(c, proxy, script, bot, asked)
        finally:
            await worker.stop()


async def test_a_late_result_replaces_the_interruption_once_after_the_bot_restarted(
    project_dir: Path, tmp_path: Path
) -> None:
    async with judged_lost(project_dir, tmp_path) as lost:
        c, asked = lost.c, lost.asked
        lost.bot.send_signal(signal.SIGKILL)
        await lost.bot.wait()
        lost.script.release.set()  # it finishes while nobody hears its worker

        async with bot_process(c.config, c.slack, c.env):
            await lost.proxy.restore()
            await c.until_said("D1", asked, "finished after all")
            await c.until_said("D1", asked, "Done: fix it remotely")
            late = c.said("D1", asked, "finished after all")
            results = c.said("D1", asked, "Done: fix it remotely")

    [dispatch] = c.dispatches()
    assert len(late) == 1 and len(results) == 1
    assert dispatch["status"] == "completed" and dispatch["error"] is None
    assert len(lost.script.sessions) == 1  # the same run, never started again


async def test_a_late_result_whose_announcement_a_kill_cut_short_is_told_once_after_the_restart(
    project_dir: Path, tmp_path: Path
) -> None:
    async with judged_lost(project_dir, tmp_path) as lost:
        c, asked = lost.c, lost.asked
        # Announcing the result, the bot looks for the notice in the thread: it waits
        # there, the result already in task.json, when it is killed.
        c.slack.faults.stall("conversations.replies")
        lost.script.release.set()
        await lost.proxy.restore()

        def held_after_storing() -> bool:
            if "conversations.replies" not in c.slack.faults.waiting:
                return False
            return [d["status"] for d in c.dispatches()] == ["completed"]

        await c.slack.wait_for(held_after_storing, WAIT)
        lost.bot.send_signal(signal.SIGKILL)
        await lost.bot.wait()
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

    assert len(late) == 1 and len(results) == 1
    assert interrupted == []  # the result took the notice's place
    assert len(lost.script.sessions) == 1  # the same run, never started again


@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGKILL])
async def test_a_kill_the_bot_could_not_deliver_stops_the_agent_after_the_bot_restarted(
    project_dir: Path, tmp_path: Path, stop: signal.Signals
) -> None:
    async with nats_bot(
        project_dir, tmp_path, lambda request: Turn(stall_seconds=120), lost_after=LOST_AFTER
    ) as c:
        worker = await c.worker()
        try:
            async with bot_process(c.config, c.slack, c.env) as bot:
                asked = (await c.slack.user_message("U1", "D1", "a very slow job")).event["ts"]
                await c.model.wait_for_request(timeout=WAIT)  # at work on the worker
                [dispatch] = c.dispatches()
                await c.nats.stop()
                await c.slack.slash_command("/harness", f"kill {dispatch['agentId']}", "U1", "D1")
                await c.until_said("D1", asked, "was stopped by <@U1>")
                bot.send_signal(stop)
                await bot.wait()
            running_meanwhile = bool(claude_children(worker.process.pid))
            await c.nats.start()

            async with bot_process(c.config, c.slack, c.env):
                async with asyncio.timeout(WAIT):  # the worker is told, and its CLI ends
                    while claude_children(worker.process.pid):
                        await asyncio.sleep(0.1)
                await worker.said(f"agent {dispatch['agentId']} killed")
        finally:
            await worker.stop()

    assert running_meanwhile  # nobody could tell it before
    assert len(c.said("D1", asked, "was stopped by <@U1>")) == 1


async def test_a_result_kept_by_a_worker_stopped_during_an_outage_reaches_the_thread_once(
    project_dir: Path, tmp_path: Path
) -> None:
    script = HeldUntilReleased()
    async with nats_bot(project_dir, tmp_path, script, lost_after=LOST_AFTER) as c:
        worker = await c.worker()
        again = None
        try:
            async with bot_process(c.config, c.slack, c.env):
                asked = (await c.slack.user_message("U1", "D1", "fix it remotely")).event["ts"]
                await c.model.wait_for_request(timeout=WAIT)  # at work on the worker
                [dispatch] = c.dispatches()
                await c.nats.stop()
                script.release.set()
                await worker.said(f"agent {dispatch['agentId']} completed")
                worker.process.send_signal(signal.SIGTERM)  # NATS still away
                assert await worker.ended() == 0
                await c.nats.start()
                again = await c.worker()  # the same workspaces folder
                await c.until_said("D1", asked, "Done: fix it remotely")
                published = await again.said("published")
                results = c.said("D1", asked, "Done: fix it remotely")
        finally:
            await worker.stop()
            if again is not None:
                await again.stop()

    [stored] = c.dispatches()
    assert len(results) == 1
    assert stored["status"] == "completed"
    assert "kept in" in line_with(worker.lines, "not stored in NATS yet")
    assert f"agent {dispatch['agentId']}" in published


def line_with(lines: list[str], needle: str) -> str:
    """The one line of a log with ``needle``."""
    [line] = [line for line in lines if needle in line]
    return line
