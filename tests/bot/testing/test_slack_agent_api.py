"""The emulator's agent surfaces behave as Slack does, seen through the real slack_sdk client:
assistant-thread status lines (their history, cleared by a reply), suggested prompts, titles,
streams, raw and fed by the SDK's `chat_stream` helper (text, task lines, plan, stop, mode
mismatches, recipients, size and rate limits, refusal), and published Home views."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable
from typing import Any

import pytest
from slack_sdk.errors import SlackApiError
from slack_sdk.models.messages.chunk import MarkdownTextChunk, PlanUpdateChunk, TaskUpdateChunk
from slack_sdk.web.async_client import AsyncWebClient

from bot.testing.slack_agent_api import CALL_TEXT_LIMIT
from bot.testing.slack_emulator import SlackEmulator

pytestmark = pytest.mark.anyio


@pytest.fixture
async def slack() -> AsyncIterator[SlackEmulator]:
    async with SlackEmulator(delivery="none") as emulator:
        yield emulator


def client(slack: SlackEmulator) -> AsyncWebClient:
    return AsyncWebClient(token=slack.identity.bot_token, base_url=slack.api_url)


async def error_of(call: Awaitable[Any]) -> tuple[int, str]:
    with pytest.raises(SlackApiError) as raised:
        await call
    return raised.value.response.status_code, str(raised.value.response["error"])


# --------------------------------------------------------------------------- assistant threads


async def test_status_lines_are_kept_in_order_and_a_reply_clears_the_one_shown(
    slack: SlackEmulator,
) -> None:
    web = client(slack)
    root = (await web.chat_postMessage(channel="D1", text="root"))["ts"]
    await web.assistant_threads_setStatus(
        channel_id="D1", thread_ts=root, status="is thinking…", loading_messages=["Reading…"]
    )
    await web.assistant_threads_setStatus(channel_id="D1", thread_ts=root, status="is writing…")
    shown = slack.agent.status("D1", root)
    await web.chat_postMessage(channel="D1", thread_ts=root, text="here you go")
    after_reply = slack.agent.status("D1", root)
    await web.assistant_threads_setStatus(channel_id="D1", thread_ts=root, status="is checking…")
    await web.assistant_threads_setStatus(channel_id="D1", thread_ts=root, status="")
    too_many = await error_of(
        web.assistant_threads_setStatus(
            channel_id="D1", thread_ts=root, status="x", loading_messages=["m"] * 11
        )
    )

    history = slack.agent.status_history("D1", root)
    assert (shown, after_reply, slack.agent.status("D1", root)) == ("is writing…", "", "")
    assert slack.agent.statuses("D1", root) == ["is thinking…", "is writing…", "is checking…", ""]
    assert history[0].loading_messages == ("Reading…",) and history[1].loading_messages == ()
    assert [h.time for h in history] == sorted(h.time for h in history)
    assert too_many == (200, "invalid_arguments")


async def test_suggested_prompts_and_the_title_are_kept_per_thread(slack: SlackEmulator) -> None:
    web = client(slack)
    root = await slack.agent.assistant_thread_started("U1", "D1")
    prompts = [{"title": "Plan", "message": "plan: x"}, {"title": "Fix", "message": "fix y"}]
    await web.assistant_threads_setSuggestedPrompts(
        channel_id="D1", thread_ts=root, prompts=prompts, title="Try one of these"
    )
    await web.assistant_threads_setTitle(channel_id="D1", thread_ts=root, title="Plan x")
    five = await error_of(
        web.assistant_threads_setSuggestedPrompts(
            channel_id="D1", thread_ts=root, prompts=[prompts[0]] * 5
        )
    )
    none = await error_of(
        web.assistant_threads_setSuggestedPrompts(channel_id="D1", thread_ts=root, prompts=[])
    )

    assert slack.agent.suggested_prompts("D1", root) == prompts
    assert slack.agent.suggested_prompts_title("D1", root) == "Try one of these"
    assert slack.agent.title("D1", root) == "Plan x"
    [shown_root] = slack.thread("D1", root)
    assert shown_root["subtype"] == "assistant_app_thread"
    assert shown_root["assistant_app_thread"]["title"] == "Plan x"
    assert five == none == (200, "invalid_arguments")


# --------------------------------------------------------------------------- streams


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

    [stream] = slack.agent.streams("D1", root)
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
    assert slack.agent.streams("C1")[0].text == "." * 9


async def test_the_sdk_stream_helper_grows_one_thread_message_until_stopped(
    slack: SlackEmulator,
) -> None:
    web = client(slack)
    root = (await web.chat_postMessage(channel="D1", text="root"))["ts"]
    await web.assistant_threads_setStatus(channel_id="D1", thread_ts=root, status="is thinking…")
    streamer = await web.chat_stream(channel="D1", thread_ts=root, buffer_size=20)
    pieces = ["Looking at ", "the page. ", "The toggle ", "goes in the header."]
    for piece in pieces[:2]:
        await streamer.append(markdown_text=piece)
    ts = streamer.ts
    assert ts is not None
    midway = (await web.conversations_replies(channel="D1", ts=root))["messages"]
    for piece in pieces[2:]:
        await streamer.append(markdown_text=piece)
    blocks = [{"type": "context", "elements": [{"type": "mrkdwn", "text": "done"}]}]
    metadata = {"event_type": "task_done", "event_payload": {"slug": "a1"}}
    await streamer.stop(markdown_text=" Done.", blocks=blocks, metadata=metadata)
    after_stop = await error_of(web.chat_appendStream(channel="D1", ts=ts, markdown_text="!"))

    stream = slack.agent.stream("D1", ts)
    assert stream is not None and stream.state == "stopped"
    assert stream.text == "".join(pieces) + " Done."
    assert [m["text"] for m in midway] == ["root", "Looking at the page. "]
    message = slack.thread("D1", root)[1]
    assert (message["ts"], message["text"], message["bot_id"]) == (ts, stream.text, "BBOT")
    assert message["blocks"] == blocks and message["metadata"] == metadata
    # The helper buffers 20 characters: one call per full buffer, the rest with the stop.
    assert [[c["text"] for c in a["chunks"]] for a in stream.appends] == [
        ["Looking at the page. "],
        ["The toggle goes in the header."],
        [" Done."],
    ]
    assert slack.agent.status("D1", root) == ""  # the stream is the bot's reply
    assert after_stop == (200, "message_not_in_streaming_state")


async def test_task_lines_keep_their_place_and_take_each_update(slack: SlackEmulator) -> None:
    web = client(slack)
    root = (await web.chat_postMessage(channel="D1", text="root"))["ts"]
    ts = (
        await web.chat_startStream(
            channel="D1",
            thread_ts=root,
            task_display_mode="plan",
            chunks=[PlanUpdateChunk(title="Dark mode")],
        )
    )["ts"]
    dev = TaskUpdateChunk(id="a2", title="developer: toggle", status="pending")
    rev = TaskUpdateChunk(id="a3", title="reviewer", status="pending")
    await web.chat_appendStream(channel="D1", ts=ts, chunks=[dev, rev])
    working = TaskUpdateChunk(
        id="a2", title="developer: toggle", status="in_progress", details="editing header.html"
    )
    await web.chat_appendStream(
        channel="D1", ts=ts, chunks=[MarkdownTextChunk(text="Go."), working]
    )
    await web.chat_stopStream(
        channel="D1", ts=ts, chunks=[{"type": "task_update", "id": "a2", "status": "complete"}]
    )
    bad = await error_of(
        web.chat_startStream(
            channel="D1", thread_ts=root, chunks=[{"type": "task_update", "id": "x"}]
        )
    )

    stream = slack.agent.stream("D1", ts)
    assert stream is not None
    assert list(stream.tasks) == ["a2", "a3"]
    assert stream.task_trail("a2") == ["pending", "in_progress", "complete"]
    assert stream.tasks["a2"]["title"] == "developer: toggle"  # kept from earlier updates
    assert stream.tasks["a2"]["details"] == "editing header.html"
    assert stream.tasks["a3"]["status"] == "pending"
    assert (stream.plan_title, stream.task_display_mode, stream.text) == (
        "Dark mode",
        "plan",
        "Go.",
    )
    assert bad == (200, "invalid_chunks")


async def test_a_channel_stream_names_its_recipient(slack: SlackEmulator) -> None:
    web = client(slack)
    root = (await web.chat_postMessage(channel="C1", text="root"))["ts"]
    nobody = await error_of(web.chat_startStream(channel="C1", thread_ts=root))
    no_team = await error_of(
        web.chat_startStream(channel="C1", thread_ts=root, recipient_user_id="U1")
    )
    ts = (
        await web.chat_startStream(
            channel="C1", thread_ts=root, recipient_user_id="U1", recipient_team_id="T1"
        )
    )["ts"]

    stream = slack.agent.stream("C1", ts)
    assert nobody == (200, "missing_recipient_user_id")
    assert no_team == (200, "missing_recipient_team_id")
    assert stream is not None and (stream.recipient_user, stream.recipient_team) == ("U1", "T1")
    assert len(slack.thread("C1", root)) == 2  # the refused starts made no message


async def test_stream_text_is_limited_per_call_and_in_total(slack: SlackEmulator) -> None:
    web = client(slack)
    root = (await web.chat_postMessage(channel="D1", text="root"))["ts"]
    too_long_start = await error_of(
        web.chat_startStream(
            channel="D1", thread_ts=root, markdown_text="x" * (CALL_TEXT_LIMIT + 1)
        )
    )
    slack.api.agent.stream_text_limit = 10
    ts = (await web.chat_startStream(channel="D1", thread_ts=root, markdown_text="12345"))["ts"]
    over_total = await error_of(web.chat_appendStream(channel="D1", ts=ts, markdown_text="678901"))
    await web.chat_appendStream(channel="D1", ts=ts, markdown_text="67890")

    stream = slack.agent.stream("D1", ts)
    assert too_long_start == over_total == (200, "msg_too_long")
    assert stream is not None and stream.text == "1234567890"
    assert len(slack.thread("D1", root)) == 2


async def test_appends_faster_than_the_rate_get_429_with_retry_after(slack: SlackEmulator) -> None:
    web = client(slack)
    slack.api.agent.appends_per_window, slack.api.agent.append_window = 3, 60.0
    root = (await web.chat_postMessage(channel="D1", text="root"))["ts"]
    ts = (await web.chat_startStream(channel="D1", thread_ts=root))["ts"]
    for n in range(3):
        await web.chat_appendStream(channel="D1", ts=ts, markdown_text=str(n))
    with pytest.raises(SlackApiError) as raised:
        await web.chat_appendStream(channel="D1", ts=ts, markdown_text="!")
    other = (await web.chat_startStream(channel="D1", thread_ts=root))["ts"]
    await web.chat_appendStream(channel="D1", ts=other, markdown_text="own budget")

    response = raised.value.response
    assert (response.status_code, response["error"]) == (429, "ratelimited")
    assert 59 <= int(response.headers["Retry-After"]) <= 60
    assert slack.calls("chat.appendStream")[3].status == 429
    stream = slack.agent.stream("D1", ts)
    assert stream is not None and stream.text == "012"


async def test_streams_can_be_refused_and_only_stream_messages_take_appends(
    slack: SlackEmulator,
) -> None:
    web = client(slack)
    root = (await web.chat_postMessage(channel="D1", text="root"))["ts"]
    slack.agent.refuse_streaming()
    refused = await error_of(web.chat_startStream(channel="D1", thread_ts=root))
    slack.agent.refuse_streaming("team_not_allowed")
    refused_too = await error_of(web.chat_startStream(channel="D1", thread_ts=root))
    slack.agent.refuse_streaming(None)
    await web.chat_startStream(channel="D1", thread_ts=root, markdown_text="ok")
    user_ts = (await slack.user_message("U1", "D1", "hi", thread_ts=root)).event["ts"]
    plain = await error_of(web.chat_appendStream(channel="D1", ts=root, markdown_text="x"))
    users = await error_of(web.chat_appendStream(channel="D1", ts=user_ts, markdown_text="x"))
    unknown = await error_of(web.chat_stopStream(channel="D1", ts="1.000000"))

    assert refused == (200, "not_allowed_token_type")
    assert refused_too == (200, "team_not_allowed")
    assert [m["text"] for m in slack.thread("D1", root)] == ["root", "ok", "hi"]
    assert plain == (200, "message_not_in_streaming_state")
    assert users == (200, "message_not_owned_by_app")
    assert unknown == (200, "message_not_found")


# --------------------------------------------------------------------------- App Home


async def test_the_latest_home_view_is_kept_per_user_under_one_id(slack: SlackEmulator) -> None:
    web = client(slack)
    first = {
        "type": "home",
        "blocks": [{"type": "section", "text": {"type": "mrkdwn", "text": "1"}}],
    }
    second = {"type": "home", "blocks": []}
    one = (await web.views_publish(user_id="U1", view=first))["view"]
    two = (await web.views_publish(user_id="U1", view=second))["view"]
    modal = await error_of(web.views_publish(user_id="U1", view={"type": "modal", "blocks": []}))

    shown = slack.agent.home_view("U1")
    assert shown is not None and shown["blocks"] == [] and shown["id"] == one["id"] == two["id"]
    assert slack.agent.home_view("U2") is None
    assert modal == (200, "invalid_arguments")
