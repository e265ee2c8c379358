"""Slack failing the bot: results are retried until Slack takes them, kept across a stop, and
what Slack will never take is recorded on the dispatch. A real Bolt app over the emulator;
agents held by a scripted runtime."""

from __future__ import annotations

import dataclasses
import time

import pytest

from bot.settings import BotOptions
from bot.testing.slack_emulator import SlackEmulator
from harness.cli.render import render_task
from harness.testing.held_runtime import HeldRuntime
from tests.bot.conftest import WAIT, Rig, RigFactory, message_text
from tests.support import latest_task

pytestmark = [pytest.mark.anyio, pytest.mark.waits]

# Retries a tenth of a second apart, and a short wait for Slack at shutdown.
FAST = BotOptions(
    status_interval=0.2, delivery_retry_limit=0.1, drain_timeout=1.0, stream_replies=False
)


def result_messages(r: Rig, channel: str, thread_ts: str) -> list[str]:
    return [
        message_text(m)
        for m in r.bot_messages(channel, thread_ts)
        if "finished" in message_text(m) or "was interrupted" in message_text(m)
    ]


def working(slack: SlackEmulator, channel: str, thread_ts: str) -> list[str]:
    return [
        message_text(m)
        for m in slack.thread(channel, thread_ts)
        if "is working…" in message_text(m) or "is queued…" in message_text(m)
    ]


async def started_agent(r: Rig, text: str) -> tuple[str, str]:
    """A request in a DM whose agent is now running (held): (thread ts, agent id)."""
    asked = (await r.say(text, channel="D1")).event["ts"]
    await r.held.wait_started(len(r.held.started) + 1)
    [agent] = [a for a in r.orchestrator.agents() if a.status == "running"]
    await r.slack.wait_for(lambda: working(r.slack, "D1", asked) or None, WAIT)
    return asked, agent.agent_id


@pytest.mark.parametrize(
    ("status", "error"),
    [(500, "internal_error"), (503, "service_unavailable"), (200, "fatal_error"), (429, None)],
)
async def test_a_result_slack_fails_to_take_is_retried_until_it_arrives_then_reacted(
    rig: RigFactory, status: int, error: str | None
) -> None:
    async with rig(runtime=HeldRuntime(), options=FAST) as r:
        asked, agent_id = await started_agent(r, "fix the footer")
        r.slack.faults.fail_next("chat.update", times=3, status=status, error=error, retry_after=0)
        r.held.release(agent_id)

        assert await r.final_reaction("D1", asked) == "white_check_mark"
        calls = r.slack.calls()

    assert len(result_messages(r, "D1", asked)) == 1
    assert working(r.slack, "D1", asked) == []
    assert len([c for c in calls if c.method == "chat.update" and not c.ok]) >= 3
    # The ✅ came only once the status message had become the result.
    [result] = [
        n
        for n, c in enumerate(calls)
        if c.method == "chat.update" and c.ok and "finished" in str(c.params)
    ]
    [reacted] = [
        n for n, c in enumerate(calls) if c.method == "reactions.add" and c.params["name"] != "eyes"
    ]
    assert reacted > result


async def test_what_slack_will_never_take_is_recorded_on_the_dispatch_and_shown(
    rig: RigFactory,
) -> None:
    async with rig(runtime=HeldRuntime(), options=FAST) as r:
        asked, agent_id = await started_agent(r, "fix the footer")
        r.slack.faults.fail_next("chat.update", status=200, error="channel_not_found")
        r.held.release(agent_id)

        await r.slack.wait_for(
            lambda: [c for c in r.slack.calls("chat.update") if not c.ok] or None, WAIT
        )
        await r.bot.outbox.settled(WAIT)  # given up, and recorded on the dispatch
        task = await latest_task(r.orchestrator)
        context = await r.orchestrator.tasks.task_context(task.slug)
        given_up = [f.error for f in await r.bot.ledger.failed()]

    assert given_up == ["channel_not_found"]
    assert task.dispatches[-1].undelivered == "channel_not_found"
    assert "Not delivered to its thread: channel_not_found" in render_task(task, context)
    # Nothing claims success over a message that never changed.
    assert "white_check_mark" not in r.slack.reactions("D1", asked)


async def test_a_result_owed_when_the_bot_stopped_is_delivered_after_it_starts_again(
    rig: RigFactory,
) -> None:
    async with rig(runtime=HeldRuntime(), options=FAST) as r:
        asked, agent_id = await started_agent(r, "fix the footer")
        r.slack.faults.fail_next("chat.update", times=10_000, status=500)
        r.slack.faults.fail_next("chat.postMessage", times=10_000, status=500)
        r.held.release(agent_id)
        await r.slack.wait_for(
            lambda: [c for c in r.slack.calls("chat.update") if not c.ok][1:] or None, WAIT
        )
    # The bot stopped with the result undelivered; Slack recovers; the bot starts again.
    r.slack.faults.clear()
    assert result_messages(r, "D1", asked) == []

    async with rig(runtime=HeldRuntime(), options=FAST) as again:
        assert await again.final_reaction("D1", asked) == "white_check_mark"
        await again.bot.outbox.settled(WAIT)

    assert len(result_messages(again, "D1", asked)) == 1
    assert working(again.slack, "D1", asked) == []


async def test_slack_hanging_at_shutdown_delays_the_interruption_notice_to_the_next_start(
    rig: RigFactory,
) -> None:
    async with rig(runtime=HeldRuntime(), options=FAST) as r:
        asked, _ = await started_agent(r, "fix the footer")
        r.slack.faults.stall("chat.update", "chat.postMessage", "chat.delete", "reactions.add")
    # The stop did not wait on Slack for ever; the agent was interrupted meanwhile.
    r.slack.faults.unstall()
    task = await latest_task(r.orchestrator)
    assert task.dispatches[-1].status == "interrupted"

    async with rig(runtime=HeldRuntime(), options=FAST) as again:
        assert await again.final_reaction("D1", asked) == "x"
        await again.bot.outbox.settled(WAIT)
        [notice] = [m for m in again.bot_messages("D1", asked) if "was interrupted" in str(m)]

    assert working(again.slack, "D1", asked) == []
    [actions] = [b for b in notice["blocks"] if b["type"] == "actions"]
    assert actions["elements"][0]["text"]["text"] == "Run again"


async def test_a_stop_while_slack_hangs_waits_for_it_once_in_all_and_loses_nothing(
    rig: RigFactory,
) -> None:
    # A wait long beside the stop's other steps, so that once and twice are told apart on
    # a busy machine: 2.5 s once, 5 s twice.
    waiting = dataclasses.replace(FAST, drain_timeout=2.5)
    async with rig(runtime=HeldRuntime(), options=waiting) as r:
        asked, _ = await started_agent(r, "fix the footer")
        r.slack.faults.stall("chat.update", "chat.postMessage", "chat.delete", "reactions.add")
        # A follow-up while Slack hangs: its 👀 hangs in the bot's own work in flight.
        await r.say("and the header too", channel="D1", thread_ts=asked)
        await r.slack.wait_for(lambda: "reactions.add" in r.slack.faults.waiting or None, WAIT)
        stopping = time.monotonic()
        await r.server.stop()
        stopped_in = time.monotonic() - stopping
    r.slack.faults.unstall()
    # The bot's own work and the outbox share one wait for Slack (drainTimeout): a stop
    # waits it once, not once for each.
    assert stopped_in < 2 * waiting.drain_timeout
    task = await latest_task(r.orchestrator)
    assert task.dispatches[-1].status == "interrupted"

    async with rig(runtime=HeldRuntime(), options=FAST) as again:
        assert await again.final_reaction("D1", asked) == "x"
        await again.bot.outbox.settled(WAIT)
        notices = [m for m in again.bot_messages("D1", asked) if "was interrupted" in str(m)]
    assert len(notices) == 1
