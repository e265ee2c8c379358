"""A click on an approval that timed out, from a Slack client still showing its buttons,
after the bot restarted: the thread keeps its record of how the question closed ("No answer
in time"), and the clicker is told so, from what the task kept. The real Bolt app over the
emulator, restarted over the same task folder; agents held (no CLI)."""

from __future__ import annotations

import asyncio
import copy

import pytest

from bot.questions import CLOSED, STALE
from harness.testing.held_runtime import HeldRuntime
from tests.bot.conftest import RigFactory, message_text
from tests.bot.test_late_clicks import TIMED_OUT, WAIT, allow_once, clicks_handled, now
from tests.bot.test_late_clicks import timed_out_approval as approval_nobody_decides

pytestmark = [pytest.mark.anyio, pytest.mark.waits]


async def test_a_late_click_after_a_restart_keeps_the_timed_out_approvals_record(
    rig: RigFactory,
) -> None:
    async with rig(runtime=HeldRuntime()) as r:
        ts, seen = await approval_nobody_decides(r)
        recorded = copy.deepcopy(now(r, seen))

    with clicks_handled() as handled:
        async with rig(runtime=HeldRuntime()) as again:
            button = allow_once(seen)
            # The requester's client still shows the buttons: it sends the old message.
            await again.slack.block_action(
                "U1", "C1", seen["ts"], button["action_id"], button["value"],
                thread_ts=ts, seen=seen,
            )  # fmt: skip
            line = await asyncio.wait_for(handled.get(), WAIT)
            shown = now(again, seen)
            told = [e.get("text") for e in again.slack.ephemeral("U1")]

    assert "ignored: the question is closed" in line
    assert shown == recorded  # not rewritten as "no longer waiting"
    assert TIMED_OUT in message_text(shown) and STALE not in message_text(shown)
    assert told == [f"{CLOSED} {TIMED_OUT}"]
