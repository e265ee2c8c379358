"""Slack's agent surfaces, for real: the Bolt app on the emulator, the real Claude Code CLI
against the scripted model. An assistant thread from its start to the result, streamed
replies (the agent's words, drafted agents as task lines, feedback), the fallback when Slack
refuses a stream, the Home tab with its kill buttons, and the message shortcut."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from bot.home import KILL_ACTION
from bot.settings import BotOptions
from bot.streaming import FEEDBACK_ACTION
from bot.surfaces import SHORTCUT
from harness.config.settings import SlackSettings
from harness.testing.held_runtime import HeldRuntime
from harness.testing.model_turns import ToolCall
from harness.testing.scripted_model import ModelRequest, Turn, demo_script
from tests.bot.conftest import WAIT, Rig, RigFactory, message_text
from tests.support import latest_task

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

STREAMING = BotOptions(status_interval=0.2, stream_replies=True)
SAID = ["Looking at the page first.", "The toggle goes in the header.", "Both files updated."]


def talkative(request: ModelRequest) -> Turn:
    """Says one thing per turn (while looking at files), then finishes."""
    done = len(request.all_tool_results)
    if done < len(SAID):
        return Turn(text=SAID[done], tool_calls=(ToolCall("Glob", {"pattern": "*"}),))
    return Turn.finish("added the dark mode toggle", ["header.html"])


def streamed_text(r: Rig, channel: str, thread_ts: str) -> str:
    [stream] = r.slack.agent.streams(channel, thread_ts)
    return stream.text


async def test_an_assistant_thread_greets_suggests_shows_status_and_streams_the_result(
    rig: RigFactory,
) -> None:
    async with rig(talkative, options=STREAMING) as r:
        root = await r.slack.agent.assistant_thread_started("U1", "D1")
        prompts = await r.slack.wait_for(lambda: r.slack.agent.suggested_prompts("D1", root), WAIT)
        sent = await r.say("add a dark mode toggle", thread_ts=root)
        assert await r.final_reaction("D1", sent.event["ts"]) == "white_check_mark"
        statuses = r.slack.agent.statuses("D1", root)
        stream = r.slack.agent.streams("D1", root)[0]
        shown_now = r.slack.agent.status("D1", root)
        title = r.slack.agent.title("D1", root)
        greeting = r.bot_messages("D1", root)[1]

    assert "plan:" in greeting["text"]
    assert {p["message"] for p in prompts} >= {"plan: a settings page with a dark mode toggle"}
    assert statuses[0] == "is reading your message…"  # before any agent started
    assert any(s.startswith("is ") for s in statuses[1:])
    assert shown_now == ""  # the reply cleared it
    assert title == "add a dark mode toggle"
    assert stream.state == "stopped"
    message = next(m for m in r.slack.thread("D1", root) if m["ts"] == stream.ts)
    assert "added the dark mode toggle" in message_text(message)
    assert any(b["type"] == "context_actions" for b in message["blocks"])


async def test_a_streamed_reply_is_the_agents_text_in_order_and_feedback_is_recorded(
    rig: RigFactory,
) -> None:
    async with rig(talkative, options=STREAMING) as r:
        ts = (await r.say("add a dark mode toggle")).event["ts"]
        assert await r.final_reaction("D1", ts) == "white_check_mark"
        [stream] = r.slack.agent.streams("D1", ts)
        message = next(m for m in r.slack.thread("D1", ts) if m["ts"] == stream.ts)
        [actions] = [b for b in message["blocks"] if b["type"] == "context_actions"]
        button = actions["elements"][0]["negative_button"]
        await r.slack.block_action(
            "U1", "D1", stream.ts, FEEDBACK_ACTION, button["value"], thread_ts=ts
        )
        task = await latest_task(r.orchestrator)

        async def recorded() -> Any:
            while not (await r.orchestrator.tasks.task(task.slug)).dispatches[0].feedback:
                await asyncio.sleep(0.02)
            return (await r.orchestrator.tasks.task(task.slug)).dispatches[0].feedback

        feedback = await asyncio.wait_for(recorded(), WAIT)

    header, _, body = stream.text.partition("\n\n")
    assert header.startswith("*developer* (agent `a")
    assert body == "\n\n".join(SAID)
    assert [(f.user, f.value) for f in feedback] == [("U1", "bad")]


async def test_an_analysts_drafted_agents_are_task_lines_of_its_stream(rig: RigFactory) -> None:
    async with rig(demo_script, options=STREAMING) as r:
        ts = (await r.say("plan: a settings page")).event["ts"]
        assert await r.final_reaction("D1", ts) == "white_check_mark"
        task = await latest_task(r.orchestrator)
        streams = r.slack.agent.streams("D1", ts)

    analyst = next(d for d in task.dispatches if d.parent_id is None)
    [developer] = [d for d in task.dispatches if d.parent_id == analyst.agent_id]
    [analyst_stream] = [s for s in streams if s.text.startswith(f"*{analyst.role}* (agent")]
    updates = [
        chunk["status"]
        for call in analyst_stream.appends
        for chunk in call.get("chunks") or []
        if chunk.get("type") == "task_update" and chunk["id"] == developer.agent_id
    ]
    assert updates[-1] == "complete"
    assert updates == sorted(updates, key=["pending", "in_progress", "complete"].index)
    assert analyst_stream.tasks[developer.agent_id]["title"].startswith("developer: ")
    assert len(streams) == 2  # the developer streams its own reply too


async def test_a_refused_stream_falls_back_to_an_edited_status_message(rig: RigFactory) -> None:
    async with rig(talkative, options=STREAMING) as r:
        r.slack.faults.fail_next("chat.startStream", status=200, error="not_allowed_token_type")
        ts = (await r.say("add a dark mode toggle")).event["ts"]
        assert await r.final_reaction("D1", ts) == "white_check_mark"
        shown = r.bot_text("D1", ts)

    assert r.slack.agent.streams("D1", ts) == []
    assert "added the dark mode toggle" in shown
    assert r.slack.calls("chat.update")  # the status message became the result


async def test_a_stream_in_a_channel_is_addressed_to_the_person_who_asked(
    rig: RigFactory,
) -> None:
    async with rig(talkative, options=STREAMING) as r:
        ts = (await r.say("<@UBOT> add a dark mode toggle", channel="C1")).event["ts"]
        assert await r.final_reaction("C1", ts) == "white_check_mark"
        [stream] = r.slack.agent.streams("C1", ts)

    assert (stream.recipient_user, stream.recipient_team) == ("U1", "T1")
    assert stream.state == "stopped"


async def test_the_home_tab_lists_a_running_agent_whose_kill_button_stops_it_for_its_owner(
    rig: RigFactory,
) -> None:
    async with rig(runtime=HeldRuntime(), options=STREAMING,
                   slack_settings=SlackSettings(admins=("UADMIN",))) as r:  # fmt: skip
        ts = (await r.say("fix it slowly")).event["ts"]
        await r.held.wait_started(1, WAIT)
        [agent] = r.orchestrator.agents()
        await r.slack.agent.app_home_opened("U2")
        view = await r.slack.wait_for(lambda: r.slack.agent.home_view("U2"), WAIT)
        [row] = [b for b in view["blocks"] if b.get("accessory", {}).get("value") == agent.agent_id]
        assert row["accessory"]["action_id"] == KILL_ACTION

        await r.slack.agent.home_action("U2", KILL_ACTION, agent.agent_id)  # not theirs
        [refusal] = await r.slack.wait_for(lambda: r.slack.messages("U2") or None, WAIT)
        assert r.orchestrator.agent(agent.agent_id) is not None

        await r.slack.agent.home_action("U1", KILL_ACTION, agent.agent_id)
        assert await r.final_reaction("D1", ts) == "x"
        shown = r.bot_text("D1", ts)

    assert "You can't stop" in refusal["text"]
    assert "was stopped by <@U1>" in shown
    assert (await r.orchestrator.record(agent.agent_id)).status == "killed"


async def test_the_home_tab_lists_a_persons_channels_tasks_and_own_dms_not_others(
    rig: RigFactory,
) -> None:
    async with rig(runtime=HeldRuntime()) as r:
        r.held.release()
        private = (await r.say("fix my private thing", user="U1", channel="D1")).event["ts"]
        shared = (await r.say("<@UBOT> fix the shared page", user="U1", channel="C1")).event
        assert await r.final_reaction("D1", private, WAIT) == "white_check_mark"
        assert await r.final_reaction("C1", shared["ts"], WAIT) == "white_check_mark"
        r.slack.join("U2", "C1")
        shown: dict[str, str] = {}
        for user in ("U1", "U2", "U3"):
            await r.slack.agent.app_home_opened(user)
            view = await r.slack.wait_for(lambda user=user: r.slack.agent.home_view(user), WAIT)  # type: ignore[misc]
            shown[user] = json.dumps(view)

    assert "fix my private thing" in shown["U1"] and "fix the shared page" in shown["U1"]
    assert "fix my private thing" not in shown["U2"] and "fix the shared page" in shown["U2"]
    assert "fix my private thing" not in shown["U3"] and "fix the shared page" not in shown["U3"]


async def test_the_message_shortcut_starts_a_task_in_that_messages_thread(
    rig: RigFactory,
) -> None:
    async with rig(talkative, options=STREAMING) as r:
        said = await r.slack.user_message("U2", "C1", "the login page is slow on Mondays")
        ts = said.event["ts"]
        await r.slack.agent.message_shortcut("U1", "C1", ts, SHORTCUT)
        assert await r.final_reaction("C1", ts) == "white_check_mark"
        task = await latest_task(r.orchestrator)
        [stream] = r.slack.agent.streams("C1", ts)

    assert task.thread is not None and (task.thread.channel, task.thread.thread_ts) == ("C1", ts)
    assert task.description.startswith("the login page is slow on Mondays")
    assert "<@U2>'s message" in task.description and "/archives/C1/p" in task.description
    assert stream.recipient_user == "U1"  # the person who used the shortcut asked
