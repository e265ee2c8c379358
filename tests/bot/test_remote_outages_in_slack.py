"""A worker cut off from NATS, alone, while its agent works. For longer than
``lostAfterSeconds``: it is judged lost and its thread told the agent was interrupted; when
its link comes back with the agent's result, the thread is told the agent finished after all,
with that result, once, and task.json holds the result. A ``/harness kill`` meanwhile reaches
it when its link is back: its CLI stops. The real Bolt app on the emulator, a real
nats-server, a ``harness worker`` process running the real CLI against the scripted model,
reaching NATS through a proxy that is cut and restored."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from harness.testing.processes import claude_children
from harness.testing.scripted_model import Turn
from tests.bot.conftest import WAIT, RigFactory, message_text
from tests.bot.cut_off import cut_off_rig
from tests.faults.nats_bot import HeldUntilReleased

pytestmark = [pytest.mark.anyio, pytest.mark.slow, pytest.mark.nats]


async def test_a_late_result_from_a_worker_judged_lost_reaches_its_thread_once(
    rig: RigFactory, tmp_path: Path
) -> None:
    held = HeldUntilReleased()

    async with cut_off_rig(rig, tmp_path, held, lost_after=3.0) as c:
        r = c.rig
        ts = (await r.say("fix it remotely")).event["ts"]
        await c.model.wait_for_request(timeout=WAIT)  # at work on the worker
        await c.proxy.cut()

        def said(needle: str) -> list[str] | None:
            texts = [message_text(m) for m in r.bot_messages("D1", ts)]
            return [t for t in texts if needle in t] or None

        await r.slack.wait_for(lambda: said("was interrupted"), WAIT)
        held.release.set()  # the CLI finishes while its worker cannot say so
        await c.proxy.restore()
        await r.slack.wait_for(lambda: said("finished after all"), WAIT)
        await r.slack.wait_for(lambda: said("Done: fix it remotely"), WAIT)
        tasks = await r.orchestrator.tasks.tasks()
        [agent_id] = [d.agent_id for task in tasks for d in task.dispatches]
        stored = await r.orchestrator.record(agent_id)
        late = said("finished after all") or []
        results = said("Done: fix it remotely") or []

    assert len(late) == 1 and len(results) == 1
    assert stored.status == "completed"
    assert stored.result is not None and "Done: fix it remotely" in stored.result.summary


async def test_a_kill_sent_while_a_worker_is_cut_off_stops_its_cli_when_the_link_is_back(
    rig: RigFactory, tmp_path: Path
) -> None:
    async with cut_off_rig(
        rig, tmp_path, lambda request: Turn(stall_seconds=120), lost_after=60.0
    ) as c:
        r = c.rig
        ts = (await r.say("a very slow job")).event["ts"]
        await c.model.wait_for_request(timeout=WAIT)  # at work on the worker
        [agent] = await r.slack.wait_for(
            lambda: [a for a in r.orchestrator.agents() if a.worker] or None, WAIT
        )
        await c.proxy.cut()
        killed = await r.slack.slash_command("/harness", f"kill {agent.agent_id}", "U1", "D1")
        assert await r.final_reaction("D1", ts) == "x"
        running_while_cut_off = bool(claude_children(c.worker.pid))
        await c.proxy.restore()
        async with asyncio.timeout(WAIT):  # the worker is told, and its CLI ends
            while claude_children(c.worker.pid):
                await asyncio.sleep(0.1)
        shown = r.bot_text("D1", ts)

    assert killed.response_payload["text"].startswith(f"Stopping developer `{agent.agent_id}`")
    assert running_while_cut_off  # nobody could tell it then
    assert "⏹️ *developer* was stopped by <@U1>" in shown
