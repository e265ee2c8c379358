"""The emulator's agent sessions behave as Slack documents, through the real slack_sdk client:
a session per thread made by setStatus (title and initiator on the creating call), checked
arguments, rename, the warning to an app not subscribed to `agent_session_stopped`, the error
to an app not declared an agent, a stream ending with a session status, and Stop pressed by
a user reaching a Bolt listener (streams stopped, named in the event)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable
from typing import Any

import pytest
from slack_bolt.adapter.socket_mode.async_handler import AsyncSocketModeHandler
from slack_bolt.async_app import AsyncApp
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from bot.testing.slack_emulator import SlackEmulator
from bot.testing.slack_sessions import UNSUBSCRIBED
from tests.bot.testing.serving import serve_http

pytestmark = pytest.mark.anyio

SECRET = "agent-sessions-secret"
JSON = dict[str, Any]


@pytest.fixture
async def slack() -> AsyncIterator[SlackEmulator]:
    async with SlackEmulator(signing_secret=SECRET, delivery="none") as emulator:
        yield emulator


def client(slack: SlackEmulator) -> AsyncWebClient:
    return AsyncWebClient(token=slack.identity.bot_token, base_url=slack.api_url)


async def error_of(call: Awaitable[Any]) -> str:
    with pytest.raises(SlackApiError) as raised:
        await call
    return str(raised.value.response["error"])


async def thread(slack: SlackEmulator, channel: str = "D1") -> str:
    return str((await slack.user_message("U1", channel, "fix the login page")).event["ts"])


async def test_set_status_makes_a_threads_session_then_moves_it(slack: SlackEmulator) -> None:
    web, ts = client(slack), await thread(slack)

    made = await web.agents_sessions_setStatus(
        channel_id="D1", thread_ts=ts, status="processing", title="fix it", initiator_user_id="U1"
    )
    await web.agents_sessions_setStatus(channel_id="D1", thread_ts=ts, status="suspended")
    await web.agents_sessions_setStatus(channel_id="D1", thread_ts=ts, status="suspended")
    await web.agents_sessions_rename(channel_id="D1", thread_ts=ts, title="fix the login page")
    session = slack.agent.session("D1", ts)

    assert made.get("warning") is None
    assert session is not None
    assert (session.status, session.title, session.initiator) == (
        "suspended",
        "fix the login page",
        "U1",
    )
    assert session.history == ["processing", "suspended"]
    assert slack.agent.session_status("D1", "1.0") is None


async def test_bad_arguments_are_refused(slack: SlackEmulator) -> None:
    web, ts = client(slack), await thread(slack)
    set_status = web.agents_sessions_setStatus

    assert await error_of(set_status(channel_id="D1", thread_ts=ts, status="busy")) == (
        "invalid_status"
    )
    long_title = "x" * 201
    assert await error_of(
        set_status(channel_id="D1", thread_ts=ts, status="active", title=long_title)
    ) == ("invalid_title")
    assert await error_of(set_status(channel_id="D1", thread_ts="9.9", status="active")) == (
        "thread_not_found"
    )
    assert await error_of(set_status(channel_id="", thread_ts=ts, status="active")) == (
        "channel_not_found"
    )
    assert await error_of(web.agents_sessions_rename(channel_id="D1", thread_ts=ts, title="t")) == (
        "session_not_found"
    )
    assert slack.agent.session("D1", ts) is None


async def test_an_app_not_subscribed_to_stop_is_warned_and_one_not_an_agent_refused(
    slack: SlackEmulator,
) -> None:
    web, ts = client(slack), await thread(slack)
    slack.agent.subscribe_to_stop(False)
    warned = await web.agents_sessions_setStatus(channel_id="D1", thread_ts=ts, status="active")
    slack.agent.declare_agent("not_allowed")
    refused = await error_of(
        web.agents_sessions_setStatus(channel_id="D1", thread_ts=ts, status="processing")
    )

    assert warned["ok"] is True
    assert warned["warning"] == UNSUBSCRIBED
    assert warned["response_metadata"]["warnings"] == [UNSUBSCRIBED]
    assert refused == "not_allowed"
    assert slack.agent.session_status("D1", ts) == "active"
    with pytest.raises(ValueError, match="not subscribed"):
        await slack.agent.press_stop("U1", "D1", ts)


async def test_a_stream_can_end_with_the_sessions_status(slack: SlackEmulator) -> None:
    web, ts = client(slack), await thread(slack)
    await web.agents_sessions_setStatus(channel_id="D1", thread_ts=ts, status="processing")
    started = await web.chat_startStream(channel="D1", thread_ts=ts, markdown_text="working")

    await web.chat_stopStream(channel="D1", ts=started["ts"], session_status="active")

    assert slack.agent.session_status("D1", ts) == "active"
    stream = slack.agent.stream("D1", started["ts"])
    assert stream is not None and stream.session_status == "active"


@pytest.mark.parametrize("delivery", ["http", "socket"])
async def test_pressing_stop_stops_the_threads_streams_and_tells_the_app(
    slack: SlackEmulator, delivery: str
) -> None:
    web, ts = client(slack), await thread(slack)
    await web.agents_sessions_setStatus(channel_id="D1", thread_ts=ts, status="processing")
    live = await web.chat_startStream(channel="D1", thread_ts=ts, markdown_text="working")
    app = AsyncApp(client=web, signing_secret=SECRET)
    stopped: list[JSON] = []

    async def on_stopped(event: JSON) -> None:
        stopped.append(event)  # and, as Slack asks, the app moves the session on itself
        await web.agents_sessions_setStatus(channel_id="D1", thread_ts=ts, status="active")

    app.event("agent_session_stopped")(on_stopped)
    if delivery == "http":
        async with serve_http(app, slack):
            await slack.agent.press_stop("U2", "D1", ts)
    else:
        slack.delivery = "socket"
        handler = AsyncSocketModeHandler(app, slack.identity.app_token, ping_interval=30)
        await handler.connect_async()  # type: ignore[no-untyped-call]
        try:
            await slack.agent.press_stop("U2", "D1", ts)
        finally:
            await handler.close_async()  # type: ignore[no-untyped-call]
    await slack.wait_for(lambda: slack.agent.session_status("D1", ts) == "active", 5.0)

    [event] = stopped
    assert (event["channel"], event["thread_ts"], event["user"]) == ("D1", ts, "U2")
    assert event["streaming_message_ts"] == [live["ts"]]
    stream = slack.agent.stream("D1", live["ts"])
    assert stream is not None and stream.state == "stopped"
    session = slack.agent.session("D1", ts)
    assert session is not None and session.history == ["processing", "active"]  # not Slack
    assert await error_of(
        web.chat_appendStream(channel="D1", ts=live["ts"], markdown_text="more")
    ) == ("message_not_in_streaming_state")
