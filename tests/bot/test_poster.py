"""Slack calls worth trying again (a post an agent waits on, the last append of a streamed
reply) against the Slack emulator: a transient failure is tried again and the message lands
once; a refusal that will not go away is not tried again; out of tries, the caller is told
(the post's None, the append kept for the next flush). Waits are cut to milliseconds."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator

import pytest

import bot.poster
import bot.streaming
from bot.poster import Poster, SlackClient
from bot.streaming import ReplyStream
from bot.testing.slack_emulator import SlackEmulator
from harness.retry import Backoff
from harness.tasks.model import ThreadRef
from tests.bot.conftest import BOT_TOKEN

pytestmark = pytest.mark.anyio


@pytest.fixture(autouse=True)
def quick_waits(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bot.poster, "_POST_BACKOFF", Backoff(first=0.001, cap=0.002))
    monkeypatch.setattr(bot.streaming, "_APPEND_BACKOFF", Backoff(first=0.001, cap=0.002))


@pytest.fixture
async def client(slack: SlackEmulator) -> AsyncIterator[SlackClient]:
    slack.delivery = "none"
    client = SlackClient(token=BOT_TOKEN, base_url=slack.api_url)
    yield client
    if client.session is not None:
        await client.session.close()


async def thread_of(slack: SlackEmulator) -> ThreadRef:
    asked = await slack.user_message("U1", "D1", "fix the footer")
    return ThreadRef("D1", str(asked.event["ts"]))


def logged(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "bot.poster"]


def said(slack: SlackEmulator, thread: ThreadRef, text: str) -> int:
    return sum(m.get("text") == text for m in slack.thread(thread.channel, thread.thread_ts))


async def test_a_post_slack_fails_transiently_is_tried_again_and_lands_once(
    slack: SlackEmulator, client: SlackClient, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="bot.poster")
    thread = await thread_of(slack)
    slack.faults.fail_next("chat.postMessage", 2, status=503)

    ts = await Poster(client).post(thread, "Which colour?", attempts=4)

    assert ts is not None and said(slack, thread, "Which colour?") == 1
    assert len(slack.calls("chat.postMessage")) == 3
    assert logged(caplog) == ["chat.postMessage to D1 failed: internal_error"] * 2


async def test_a_post_slack_refuses_for_good_is_not_tried_again(
    slack: SlackEmulator, client: SlackClient, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="bot.poster")
    thread = await thread_of(slack)
    slack.faults.fail_next("chat.postMessage", 3, status=200, error="channel_not_found")

    assert await Poster(client).post(thread, "Which colour?", attempts=4) is None
    assert len(slack.calls("chat.postMessage")) == 1
    assert logged(caplog) == ["chat.postMessage to D1 failed: channel_not_found"]


async def test_a_post_out_of_tries_is_none_and_by_default_tried_once(
    slack: SlackEmulator, client: SlackClient
) -> None:
    thread = await thread_of(slack)
    slack.faults.fail_next("chat.postMessage", 10, status=500)
    poster = Poster(client)

    assert await poster.post(thread, "Which colour?", attempts=2) is None
    assert len(slack.calls("chat.postMessage")) == 2
    assert await poster.post(thread, "Which colour?") is None
    assert len(slack.calls("chat.postMessage")) == 3
    assert said(slack, thread, "Which colour?") == 0


async def test_the_last_append_slack_fails_transiently_is_tried_again_and_sent_once(
    slack: SlackEmulator, client: SlackClient
) -> None:
    thread = await thread_of(slack)
    stream = ReplyStream(client, thread, "fix-the-footer", None)
    ts = await stream.start("*developer*:")
    assert ts is not None
    stream.say("Fixed the footer.")
    slack.faults.fail_next("chat.appendStream", 2, status=502)

    await stream.flush(attempts=4)

    shown = slack.agent.stream("D1", ts)
    assert shown is not None and shown.text.count("Fixed the footer.") == 1
    assert stream.appends == 1 and not stream.pending and not stream.over


async def test_an_append_out_of_tries_is_kept_for_the_next_flush(
    slack: SlackEmulator, client: SlackClient
) -> None:
    thread = await thread_of(slack)
    stream = ReplyStream(client, thread, "fix-the-footer", None)
    ts = await stream.start("*developer*:")
    assert ts is not None
    stream.say("Fixed the footer.")
    slack.faults.fail_next("chat.appendStream", 2, status=500)

    await stream.flush(attempts=2)
    assert stream.pending and stream.appends == 0
    await stream.flush()

    shown = slack.agent.stream("D1", ts)
    assert shown is not None and shown.text.count("Fixed the footer.") == 1
    assert len(slack.calls("chat.appendStream")) == 3


async def test_a_stream_slack_ended_takes_no_more_and_is_not_tried_again(
    slack: SlackEmulator, client: SlackClient
) -> None:
    thread = await thread_of(slack)
    stream = ReplyStream(client, thread, "fix-the-footer", None)
    assert await stream.start("*developer*:") is not None
    stream.say("Fixed the footer.")
    gone = "message_not_in_streaming_state"
    slack.faults.fail_next("chat.appendStream", 3, status=200, error=gone)

    await stream.flush(attempts=4)

    assert stream.over and not stream.pending
    assert len(slack.calls("chat.appendStream")) == 1
