"""The emulator's simulated users meet the agent surfaces the way Slack delivers them: the
events and payloads Bolt's `AsyncAssistant`, `app.event` and `app.shortcut` listeners receive
over signed HTTP (assistant threads started and changed, messages in them, the Home tab
opened, a message shortcut)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
from slack_bolt.async_app import AsyncApp, AsyncAssistant
from slack_sdk.web.async_client import AsyncWebClient

from bot.testing.slack_emulator import SlackEmulator
from tests.bot.testing.serving import serve_http

pytestmark = pytest.mark.anyio

SECRET = "agent-surfaces-secret"
WAIT = 5.0
JSON = dict[str, Any]


@pytest.fixture
async def slack() -> AsyncIterator[SlackEmulator]:
    async with SlackEmulator(signing_secret=SECRET, delivery="none") as emulator:
        yield emulator


def client(slack: SlackEmulator) -> AsyncWebClient:
    return AsyncWebClient(token=slack.identity.bot_token, base_url=slack.api_url)


async def test_bolt_assistant_gets_the_thread_start_context_changes_and_user_messages(
    slack: SlackEmulator,
) -> None:
    app = AsyncApp(client=client(slack), signing_secret=SECRET)
    assistant = AsyncAssistant()
    seen: list[tuple[str, JSON]] = []

    async def started(payload: JSON, say: Any, set_suggested_prompts: Any) -> None:
        seen.append(("started", payload))
        await say("Hi! What shall we build?")
        await set_suggested_prompts(prompts=[{"title": "Plan", "message": "plan: x"}])

    async def context_changed(payload: JSON) -> None:
        seen.append(("context", payload))

    async def user_message(payload: JSON, set_status: Any, say: Any) -> None:
        seen.append(("message", payload))
        await set_status("is reading your message…")
        await say(f"on it: {payload['text']}")

    async def plain_message(event: JSON) -> None:
        seen.append(("plain message", event))  # not expected: the assistant takes it

    assistant.thread_started(started)
    assistant.thread_context_changed(context_changed)
    assistant.user_message(user_message)
    app.assistant(assistant)
    app.event("message")(plain_message)
    async with serve_http(app, slack):
        root = await slack.agent.assistant_thread_started("U1", "D1", context={"channel_id": "C9"})
        await slack.wait_for(lambda: slack.agent.suggested_prompts("D1", root), WAIT)
        changed = await slack.agent.assistant_thread_context_changed(
            "U1", "D1", root, {"channel_id": "C7"}
        )
        await slack.wait_for(lambda: len(seen) == 2, WAIT)
        sent = await slack.user_message("U1", "D1", "add a toggle", thread_ts=root)
        await slack.wait_for(lambda: len(slack.thread("D1", root)) == 4, WAIT)

    started_payload = next(p for kind, p in seen if kind == "started")
    assert started_payload["assistant_thread"] == {
        "user_id": "U1",
        "context": {"channel_id": "C9", "team_id": "T1", "enterprise_id": None},
        "channel_id": "D1",
        "thread_ts": root,
    }
    assert changed.status == 200
    assert ("context", changed.event) in seen
    assert sent.event["channel_type"] == "im" and sent.event["thread_ts"] == root
    assert [kind for kind, _ in seen] == ["started", "context", "message"]
    texts = [m["text"] for m in slack.thread("D1", root)]
    assert texts[1:] == ["Hi! What shall we build?", "add a toggle", "on it: add a toggle"]
    assert slack.agent.statuses("D1", root) == ["is reading your message…"]
    assert slack.agent.status("D1", root) == ""  # the reply cleared it


async def test_bolt_gets_app_home_opened_and_the_message_shortcut(slack: SlackEmulator) -> None:
    app = AsyncApp(client=client(slack), signing_secret=SECRET)
    opened: list[JSON] = []
    shortcuts: list[tuple[JSON, str]] = []
    # What the listeners heard is this test's, not the emulator's: they say when it changes.
    heard = asyncio.Condition()

    async def hear() -> None:
        async with heard:
            heard.notify_all()

    async def on_home(event: JSON, client: AsyncWebClient) -> None:
        opened.append(event)
        section = {"type": "section", "text": {"type": "mrkdwn", "text": "tasks"}}
        await client.views_publish(
            user_id=event["user"], view={"type": "home", "blocks": [section]}
        )
        await hear()

    async def on_shortcut(ack: Any, shortcut: JSON, client: AsyncWebClient) -> None:
        await ack()
        link = await client.chat_getPermalink(
            channel=shortcut["channel"]["id"], message_ts=shortcut["message_ts"]
        )
        shortcuts.append((shortcut, str(link["permalink"])))
        await hear()

    app.event("app_home_opened")(on_home)
    app.shortcut("send_to_harness")(on_shortcut)
    parent = (await client(slack).chat_postMessage(channel="C1", text="the bug"))["ts"]
    # Stored only (delivery is "none" until served): this app has no message listener.
    reply = (await slack.user_message("U2", "C1", "see logs", thread_ts=parent)).event["ts"]
    async with serve_http(app, slack):
        first = await slack.agent.app_home_opened("U1")
        await slack.wait_for(lambda: slack.agent.home_view("U1"), WAIT)
        again = await slack.agent.app_home_opened("U1")
        picked = await slack.agent.message_shortcut("U1", "C1", reply, "send_to_harness")
        async with heard, asyncio.timeout(WAIT):
            await heard.wait_for(lambda: len(opened) == 2 and bool(shortcuts))

    assert (first.status, again.status, picked.status) == (200, 200, 200)
    assert {k: opened[0][k] for k in ("type", "user", "channel", "tab")} == {
        "type": "app_home_opened",
        "user": "U1",
        "channel": "DU1",
        "tab": "home",
    }
    assert "view" not in opened[0] and opened[1]["view"]["type"] == "home"
    [(shortcut, link)] = shortcuts
    assert shortcut["type"] == "message_action" and shortcut["callback_id"] == "send_to_harness"
    assert shortcut["user"]["id"] == "U1" and shortcut["channel"]["id"] == "C1"
    assert shortcut["trigger_id"] and shortcut["response_url"].startswith(slack.base_url)
    message = shortcut["message"]
    assert (message["user"], message["text"], message["ts"]) == ("U2", "see logs", reply)
    assert message["thread_ts"] == parent
    assert link == (
        f"https://emulated.slack.com/archives/C1/p{reply.replace('.', '')}"
        f"?thread_ts={parent}&cid=C1"
    )
