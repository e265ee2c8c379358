"""Tasks ``harness mcp`` starts in a Slack channel: the request is posted there and its thread
becomes the task's, the result follows in the thread, a start in that thread follows up on
its task, and who sees the task is who is in the channel (the Slack emulator, the bot's real
Web API client)."""

from __future__ import annotations

from typing import Any

import pytest

from bot.mcp_announce import SlackAnnouncer, from_environ
from bot.poster import SlackClient
from bot.testing.slack_emulator import SlackEmulator
from harness.project import Project
from harness.testing.scripted_model import ModelRequest, Turn
from tests.bot.conftest import BOT_TOKEN
from tests.harness.mcp_server.conftest import (
    ALICE,
    BOB,
    ServeFactory,
    call,
    connect,
    serve_factory,
)

pytestmark = pytest.mark.anyio


@pytest.fixture
def served(project: Project) -> ServeFactory:
    return serve_factory(project)


CHANNEL = "C0TEAM"


def finishing(request: ModelRequest) -> Turn:
    return Turn.finish(f"built: {request.last_user_text.splitlines()[-1][-30:]}")


def said(slack: SlackEmulator, ts: str, needle: str) -> list[dict[str, Any]] | None:
    return [m for m in slack.thread(CHANNEL, ts) if needle in str(m.get("text"))] or None


@pytest.mark.slow
async def test_a_channel_task_is_posted_followed_up_in_its_thread_and_seen_by_its_members(
    served: ServeFactory, slack: SlackEmulator
) -> None:
    announcer = SlackAnnouncer(SlackClient(token=BOT_TOKEN, base_url=slack.api_url))
    async with (
        served(finishing, announcer=announcer) as s,
        connect(s.url, ALICE) as alice,
        connect(s.url, BOB) as bob,
    ):
        started = await call(alice, "start_task", request="add a settings page", channel=CHANNEL)
        ts = started["thread"]["threadTs"]
        assert started["thread"]["channel"] == CHANNEL
        [request] = slack.thread(CHANNEL, ts)
        assert request["text"] == "<@UALICE> asked (through MCP):\nadd a settings page"
        await call(alice, "await_agent", agentId=started["agentId"])
        await slack.wait_for(lambda: said(slack, ts, "built: add a settings page"))

        assert (await call(bob, "list_tasks"))["tasks"] == []  # not in the channel
        slack.join(BOB, CHANNEL)
        [seen] = (await call(bob, "list_tasks"))["tasks"]
        assert seen["slug"] == started["taskSlug"]

        again = await call(bob, "start_task", request="and a dark mode", channel=CHANNEL,
                           threadTs=ts)  # fmt: skip
        assert again["taskSlug"] == started["taskSlug"]
        assert said(slack, ts, "<@UBOB> asked (through MCP):\nand a dark mode")
        await call(bob, "await_agent", agentId=again["agentId"])
        await slack.wait_for(lambda: said(slack, ts, "built: and a dark mode"))


def test_without_a_bot_token_there_is_no_announcer_and_a_bad_one_is_named() -> None:
    assert from_environ({}) is None
    with pytest.raises(Exception, match="SLACK_BOT_TOKEN holds a token shaped like SLACK_APP"):
        from_environ({"SLACK_BOT_TOKEN": "xapp-1-abc"})
