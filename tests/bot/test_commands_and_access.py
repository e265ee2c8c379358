"""/harness over HTTP, the allowlists, and a status message that keeps up with its agent."""

from __future__ import annotations

import time

import pytest

from bot.settings import BotOptions
from harness.testing.held_runtime import HeldRuntime
from harness.testing.scripted_model import ModelRequest, ToolCall, Turn
from tests.bot.conftest import WAIT, RigFactory

pytestmark = [pytest.mark.anyio, pytest.mark.slow]


async def test_harness_help_tasks_and_bad_input_over_http(rig: RigFactory) -> None:
    # The commands are the bot's: an agent held and let go at once finishes the task they list
    # (a DM's task through the real CLI: tests/bot/test_conversations.py).
    async with rig(runtime=HeldRuntime()) as r:
        r.held.release()
        slack = r.slack
        started = time.monotonic()
        helped = await slack.slash_command("/harness", "", "U1", "C1")
        assert helped.status == 200 and time.monotonic() - started < 3
        assert "`/harness kill <agentId>`" in helped.response_payload["text"]

        bad = await slack.slash_command("/harness", "kill <@U2> & co", "U1", "C1")
        assert "Usage: `/harness kill <agentId>`" in bad.response_payload["text"]
        odd = await slack.slash_command("/harness", "kill <b>", "U1", "C1")
        assert "`&lt;b&gt;` is not an agent id" in odd.response_payload["text"]
        unknown = await slack.slash_command("/harness", "dance", "U1", "C1")
        assert "Unknown command `dance`" in unknown.response_payload["text"]

        empty = await slack.slash_command("/harness", "list", "U1", "C1")
        assert empty.status == 200
        await slack.wait_for(lambda: [e for e in slack.ephemeral("U1") if "No agents" in e["text"]])

        sent = await r.say("fix the <b>login</b> bug")
        await r.final_reaction("D1", sent.event["ts"])
        await slack.slash_command("/harness", "tasks", "U1", "C1")
        [listing] = await slack.wait_for(
            lambda: [e for e in slack.ephemeral("U1") if "Recent tasks" in e["text"]]
        )
        [task] = await r.orchestrator.tasks.task_summaries()
        assert "<https://emulated.slack.com/archives/D1/p" in listing["text"]
        assert f"|{task.slug}>" in listing["text"]
        assert "fix the &lt;b&gt;login&lt;/b&gt; bug" in listing["text"]
        assert "last: developer completed" in listing["text"]


async def test_the_status_message_shows_elapsed_time_and_activity(rig: RigFactory) -> None:
    def script(request: ModelRequest) -> Turn:
        done = len(request.all_tool_results)
        if done == 0:
            return Turn(tool_calls=(ToolCall("Glob", {"pattern": "*.md"}),))
        if done == 1:
            return Turn(tool_calls=(ToolCall("Glob", {"pattern": "*.py"}),), stall_seconds=1.5)
        return Turn.finish("Looked around")

    async with rig(script, options=BotOptions(status_interval=0.2, stream_replies=False)) as r:
        sent = await r.say("look around")
        ts = sent.event["ts"]
        update = await r.slack.wait_for_call(
            "chat.update", lambda c: "using Glob" in str(c.params.get("text")), timeout=WAIT
        )
        assert update.params["text"].startswith("⚙️ developer is working… agent a")
        assert await r.final_reaction("D1", ts) == "white_check_mark"
        assert "Looked around" in r.bot_text("D1", ts)
