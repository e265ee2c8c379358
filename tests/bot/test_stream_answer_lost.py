"""Opening a streamed reply whose ``chat.startStream`` Slack carried out but whose answer was
lost (a reset connection, or no answer until the client gave up): the retry finds the stream
already started and carries on with it, so the thread shows one streamed message, not two.
The emulator's Web API with its ``apply_then_drop`` fault; the real Bolt app for the whole
reply; agents held (no CLI)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Literal

import aiohttp
import pytest

from bot.poster import SlackClient
from bot.settings import BotOptions
from bot.streaming import ReplyStream, stream_header
from bot.testing.slack_emulator import SlackEmulator
from harness.tasks.model import ThreadRef
from harness.testing.held_runtime import HeldRuntime
from tests.bot.conftest import BOT_TOKEN, WAIT, RigFactory, message_text

pytestmark = [pytest.mark.anyio, pytest.mark.waits]


@pytest.fixture
async def client(slack: SlackEmulator) -> AsyncIterator[SlackClient]:
    # A call Slack never answers is given up on after a second (then tried again).
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=1.0)) as session:
        yield SlackClient(token=BOT_TOKEN, base_url=slack.api_url, session=session)


@pytest.mark.parametrize("lost", ["reset", "hang"])
async def test_a_stream_slack_opened_whose_answer_was_lost_is_not_opened_twice(
    slack: SlackEmulator, client: SlackClient, lost: Literal["reset", "hang"]
) -> None:
    asked = slack.store.add("D1", {"user": "U1", "text": "fix the footer"})
    thread = ThreadRef("D1", asked["ts"])
    slack.faults.apply_then_drop("chat.startStream", how=lost)

    stream = ReplyStream(client, thread, "fix-the-footer", None)
    ts = await stream.start(stream_header("developer", "a1b2c3d4e5f", None))
    stream.say("Looking at the footer now.")
    await stream.flush()

    [opened] = slack.agent.streams("D1", thread.thread_ts)
    assert ts == opened.ts
    assert "Looking at the footer now." in opened.text
    assert len(slack.calls("chat.startStream")) == 1  # found, not started again


async def test_a_reply_whose_stream_opened_without_an_answer_streams_once_and_ends_there(
    rig: RigFactory,
) -> None:
    options = BotOptions(status_interval=0.2, stream_replies=True)
    async with rig(runtime=HeldRuntime(), options=options) as r:
        r.slack.faults.apply_then_drop("chat.startStream")
        asked = str((await r.say("fix the footer")).event["ts"])
        await r.held.wait_started(1, WAIT)
        r.held.release()
        assert await r.final_reaction("D1", asked) == "white_check_mark"
        streams = r.slack.agent.streams("D1", asked)
        shown = [message_text(m) for m in r.bot_messages("D1", asked)]

    [stream] = streams
    assert stream.state == "stopped"
    assert len([text for text in shown if "did: fix the footer" in text]) == 1
    assert len(shown) == 1  # the stream carries the result; no status message beside it
