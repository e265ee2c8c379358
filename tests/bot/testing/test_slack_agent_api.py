"""The emulator's agent surfaces behave as Slack does, seen through the real AsyncWebClient:
status lines cleared by a reply, suggested prompts and titles, streams (text, task lines,
their end, recipients, size and rate limits) and published home views."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from bot.testing.slack_agent_api import CALL_TEXT_LIMIT
from bot.testing.slack_emulator import SlackEmulator

pytestmark = pytest.mark.anyio


@pytest.fixture
async def slack() -> AsyncIterator[SlackEmulator]:
    async with SlackEmulator() as emulator:
        yield emulator


def client(slack: SlackEmulator) -> AsyncWebClient:
    return AsyncWebClient(token=slack.identity.bot_token, base_url=slack.api_url)


async def error_of(call: object) -> tuple[int, str]:
    with pytest.raises(SlackApiError) as raised:
        await call  # type: ignore[misc]
    return raised.value.response.status_code, str(raised.value.response["error"])


async def test_a_status_line_shows_until_the_bot_replies_and_prompts_and_title_are_kept(
    slack: SlackEmulator,
) -> None:
    web = client(slack)
    root = (await web.chat_postMessage(channel="D1", text="root"))["ts"]
    await web.assistant_threads_setStatus(channel_id="D1", thread_ts=root, status="is thinking…")
    shown = slack.status("D1", root)
    await web.chat_postMessage(channel="D1", thread_ts=root, text="here you go")
    prompts = [{"title": "Plan", "message": "plan: x"}]
    await web.assistant_threads_setSuggestedPrompts(
        channel_id="D1", thread_ts=root, prompts=prompts
    )
    await web.assistant_threads_setTitle(channel_id="D1", thread_ts=root, title="Plan x")
    too_many = await error_of(
        web.assistant_threads_setSuggestedPrompts(
            channel_id="D1", thread_ts=root, prompts=prompts * 5
        )
    )

    assert shown == "is thinking…"
    assert slack.status("D1", root) == ""
    assert slack.statuses("D1", root) == ["is thinking…"]
    assert slack.suggested_prompts("D1", root) == prompts
    assert slack.title("D1", root) == "Plan x"
    assert too_many == (200, "invalid_arguments")


async def test_a_stream_grows_a_thread_message_until_stopped(slack: SlackEmulator) -> None:
    web = client(slack)
    root = (await web.chat_postMessage(channel="D1", text="root"))["ts"]
    hello = {"type": "markdown_text", "text": "Hello"}
    started = await web.chat_startStream(channel="D1", thread_ts=root, chunks=[hello])
    ts = started["ts"]
    task = {"type": "task_update", "id": "a2", "title": "developer: x", "status": "pending"}
    await web.chat_appendStream(channel="D1", ts=ts, chunks=[{**hello, "text": ", world"}])
    # Started with chunks, it takes no plain markdown_text (nor the other way round).
    mixed = await error_of(web.chat_appendStream(channel="D1", ts=ts, markdown_text="!"))
    await web.chat_appendStream(channel="D1", ts=ts, chunks=[task])
    await web.chat_appendStream(channel="D1", ts=ts, chunks=[{**task, "status": "complete"}])
    blocks = [{"type": "section", "text": {"type": "mrkdwn", "text": "done"}}]
    await web.chat_stopStream(channel="D1", ts=ts, blocks=blocks)
    after_stop = await error_of(web.chat_appendStream(channel="D1", ts=ts, markdown_text="!"))
    unknown = await error_of(web.chat_appendStream(channel="D1", ts="1.0", markdown_text="!"))

    [stream] = slack.streams("D1", root)
    message = next(m for m in slack.thread("D1", root) if m["ts"] == ts)
    assert stream.text == message["text"] == "Hello, world"
    assert stream.tasks["a2"]["status"] == "complete" and stream.state == "stopped"
    assert message["blocks"] == blocks
    assert mixed == (200, "streaming_mode_mismatch")
    assert after_stop == (200, "message_not_in_streaming_state")
    assert unknown == (200, "message_not_found")


async def test_streams_need_a_recipient_in_channels_and_respect_size_and_rate_limits(
    slack: SlackEmulator,
) -> None:
    web = client(slack)
    root = (await web.chat_postMessage(channel="C1", text="root"))["ts"]
    no_recipient = await error_of(web.chat_startStream(channel="C1", thread_ts=root))
    ts = (
        await web.chat_startStream(
            channel="C1", thread_ts=root, recipient_user_id="U1", recipient_team_id="T1"
        )
    )["ts"]
    too_long = await error_of(
        web.chat_appendStream(channel="C1", ts=ts, markdown_text="x" * (CALL_TEXT_LIMIT + 1))
    )
    answers = []
    for _ in range(12):
        try:
            await web.chat_appendStream(channel="C1", ts=ts, markdown_text=".")
            answers.append(200)
        except SlackApiError as exc:
            answers.append(exc.response.status_code)
            retry_after = exc.response.headers.get("Retry-After")

    assert no_recipient == (200, "missing_recipient_user_id")
    assert too_long == (200, "msg_too_long")
    # Ten calls a second at most, the refused long one included.
    assert answers[:9] == [200] * 9 and answers[9] == 429
    assert retry_after == "1"
    assert slack.streams("C1")[0].text == "." * 9


async def test_a_published_home_view_is_kept_per_user_and_must_be_a_home_view(
    slack: SlackEmulator,
) -> None:
    web = client(slack)
    view = {
        "type": "home",
        "blocks": [{"type": "section", "text": {"type": "mrkdwn", "text": "hi"}}],
    }
    await web.views_publish(user_id="U1", view=view)
    wrong = await error_of(web.views_publish(user_id="U1", view={"type": "modal", "blocks": []}))

    shown = slack.home_view("U1")
    assert shown is not None and shown["blocks"] == view["blocks"]
    assert slack.home_view("U2") is None
    assert wrong == (200, "invalid_arguments")
