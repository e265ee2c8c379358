"""Opening a streamed reply when Slack has a passing fault: the stream is tried again and
the result arrives in it, not in an edited status message; a refusal falls back at once.
The real Bolt app over the emulator; agents held (no CLI)."""

from __future__ import annotations

import pytest

from bot.settings import BotOptions
from bot.streaming import START_ATTEMPTS
from harness.testing.held_runtime import HeldRuntime
from tests.bot.conftest import WAIT, Rig, RigFactory, message_text

pytestmark = [pytest.mark.anyio, pytest.mark.waits]

STREAMING = BotOptions(status_interval=0.2, stream_replies=True)
RESULT = "did: fix the footer"


async def run_to_the_end(r: Rig) -> str:
    """A request in D1 whose held agent finishes; the request's ts once it has its ✅."""
    asked = str((await r.say("fix the footer")).event["ts"])
    await r.held.wait_started(1, WAIT)
    r.held.release()
    assert await r.final_reaction("D1", asked) == "white_check_mark"
    return asked


def edited_to_the_result(r: Rig) -> list[object]:
    return [c for c in r.slack.calls("chat.update") if RESULT in str(c.params)]


@pytest.mark.parametrize(
    ("status", "retry_after"),
    [(500, None), (503, None), (429, 0)],
    ids=["internal error", "unavailable", "rate limited"],
)
async def test_a_stream_that_fails_to_open_once_is_opened_again_and_carries_the_result(
    rig: RigFactory, status: int, retry_after: int | None
) -> None:
    async with rig(runtime=HeldRuntime(), options=STREAMING) as r:
        # One failure more than slack_sdk's own rate-limit retries take: the bot's to retry.
        times = 1 if status != 429 else 1 + r.bot.client.retry_handlers[-1].max_retry_count
        r.slack.faults.fail_next("chat.startStream", times, status=status, retry_after=retry_after)
        asked = await run_to_the_end(r)
        [stream] = r.slack.agent.streams("D1", asked)
        shown = [message_text(m) for m in r.bot_messages("D1", asked)]

    assert stream.state == "stopped"
    assert any(RESULT in text for text in shown)
    assert edited_to_the_result(r) == []  # no status message became the result
    assert [c.ok for c in r.slack.calls("chat.startStream")][-2:] == [False, True]


async def test_a_stream_slack_refuses_falls_back_to_an_edited_message_without_retrying(
    rig: RigFactory,
) -> None:
    async with rig(runtime=HeldRuntime(), options=STREAMING) as r:
        r.slack.faults.fail_next("chat.startStream", status=200, error="not_allowed_token_type")
        asked = await run_to_the_end(r)

    assert r.slack.agent.streams("D1", asked) == []
    assert len(r.slack.calls("chat.startStream")) == 1 < START_ATTEMPTS
    assert edited_to_the_result(r)
