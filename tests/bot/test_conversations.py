"""Conversations over HTTP mode with signed requests: every thread is a task."""

from __future__ import annotations

import pytest

from harness.tasks.model import ThreadRef
from harness.testing.held_runtime import HeldRuntime
from harness.testing.scripted_model import ModelRequest, Turn, demo_script
from tests.bot.conftest import WAIT, RigFactory, finish_with_prompt, message_text
from tests.support import latest_task

pytestmark = [pytest.mark.anyio, pytest.mark.slow]


async def test_a_top_level_dm_starts_a_task_bound_to_its_thread(rig: RigFactory) -> None:
    def script(request: ModelRequest) -> Turn:
        return Turn.finish(
            "Fixed the login bug",
            changes=["auth.py: compare hashes in constant time"],
            issues=["no test for <script> & friends"],
            questions=["Should sessions expire?"],
        )

    async with rig(script) as r:
        sent = await r.say("fix the login bug")
        ts = sent.event["ts"]
        assert sent.status == 200
        assert await r.final_reaction("D1", ts) == "white_check_mark"

        assert "eyes" in r.slack.reactions("D1", ts)
        [result] = r.bot_messages("D1", ts)  # the status message became the result
        shown = message_text(result)
        assert "✅ *developer* finished" in shown
        assert "Fixed the login bug" in shown
        assert "• auth.py: compare hashes in constant time" in shown
        assert "no test for &lt;script&gt; &amp; friends" in shown
        assert "*Questions* (reply in this thread to answer)\n1. Should sessions expire?" in shown
        context = result["blocks"][-1]
        assert context["type"] == "context"
        assert "agent `a" in context["elements"][0]["text"]
        assert " turn" in context["elements"][0]["text"]
        assert "Fixed the login bug" in result["text"]  # the plain-text fallback
        status = r.slack.calls("chat.postMessage")[0]
        assert status.params["thread_ts"] == ts
        assert "developer is working… agent a" in status.params["text"]

        task = await r.orchestrator.tasks.find_task(ThreadRef("D1", ts))
        assert task is not None and task.description == "fix the login bug"
        assert [d.role for d in task.dispatches] == ["developer"]
        assert task.requester == "U1"  # kept in task.json


async def test_a_mention_in_a_channel_starts_one_task_and_a_reply_follows_up(
    rig: RigFactory,
) -> None:
    async with rig(finish_with_prompt) as r:
        sent = await r.say("<@UBOT> review the parser", channel="C1")
        assert sent.mention is not None  # Slack sent message + app_mention for it
        ts = sent.event["ts"]
        assert await r.final_reaction("C1", ts) == "white_check_mark"
        assert "reviewer* finished" in r.bot_text("C1", ts)
        assert len(r.runs()) == 1  # one run for the pair

        reply = await r.say("and the lexer too", channel="C1", thread_ts=ts)  # no mention
        assert await r.final_reaction("C1", reply.event["ts"]) == "white_check_mark"
        first, second = r.runs()
        assert "review the parser" in first.first_user_text
        prompt = second.first_user_text
        assert prompt.index("## Task History") < prompt.index("and the lexer too")
        assert "Done: review the parser" in prompt  # the first result comes first
        task = await r.orchestrator.tasks.find_task(ThreadRef("C1", ts))
        assert task is not None
        # No rule matches "and the lexer too": the thread keeps its last role.
        assert [d.role for d in task.dispatches] == ["reviewer", "reviewer"]
        assert r.bot_text("C1", ts).count("reviewer* finished") == 2


async def test_a_follow_up_is_routed_when_a_rule_matches(rig: RigFactory) -> None:
    # Routing is the bot's and the task desk's: agents held and let go at once are enough (a
    # follow-up through the real CLI: the mention-and-reply test above).
    async with rig(runtime=HeldRuntime()) as r:
        r.held.release()
        sent = await r.say("fix the parser")
        ts = sent.event["ts"]
        await r.final_reaction("D1", ts)
        reply = await r.say("review it", thread_ts=ts)
        await r.final_reaction("D1", reply.event["ts"])
        task = await r.orchestrator.tasks.find_task(ThreadRef("D1", ts))
        assert task is not None
        assert [d.role for d in task.dispatches] == ["developer", "reviewer"]


async def test_a_mention_in_an_unbound_thread_takes_its_earlier_messages_as_context(
    rig: RigFactory,
) -> None:
    # The prompt is the bot's: the agent is held (a thread's prompt reaching the model through
    # the real CLI: test_a_mention_in_a_channel_starts_one_task_and_a_reply_follows_up).
    async with rig(runtime=HeldRuntime()) as r:
        r.held.release()
        parent = await r.say("the CSV export is broken", user="U2", channel="C1")
        ts = parent.event["ts"]
        await r.say("it fails on quotes & commas", user="U3", channel="C1", thread_ts=ts)
        mention = await r.say("<@UBOT> fix it please", channel="C1", thread_ts=ts)
        assert await r.final_reaction("C1", mention.event["ts"]) == "white_check_mark"

        [run] = r.held.started
        prompt = run.prompt
        assert "the CSV export is broken" in prompt
        assert "U3: it fails on quotes & commas" in prompt
        assert prompt.rstrip().endswith("fix it please")
        task = await r.orchestrator.tasks.find_task(ThreadRef("C1", ts))
        assert task is not None and task.description.startswith("fix it please")
        assert "developer* finished" in r.bot_text("C1", ts)
        assert task.requester == "U1"  # who mentioned the bot, not who wrote before


async def test_a_rate_limited_post_is_retried_and_the_result_arrives(rig: RigFactory) -> None:
    # The agent is held: a result from the real CLI reaching its thread is proved by
    # test_a_top_level_dm_starts_a_task_bound_to_its_thread.
    async with rig(runtime=HeldRuntime()) as r:
        r.held.release()
        r.slack.faults.fail_next("chat.postMessage", times=2, status=429, retry_after=0)
        sent = await r.say("fix the login bug")
        assert await r.final_reaction("D1", sent.event["ts"]) == "white_check_mark"
        statuses = [c.status for c in r.slack.calls("chat.postMessage")]
        assert statuses[:3] == [429, 429, 200]
        assert "did: fix the login bug" in r.bot_text("D1", sent.event["ts"])


async def test_a_10000_character_result_arrives_complete_and_split(rig: RigFactory) -> None:
    words = [f"w{i:04d}<&>" for i in range(1200)]
    summary = " ".join(words)[:10_000]
    assert len(summary) == 10_000

    async with rig(lambda request: Turn.finish(summary)) as r:
        sent = await r.say("write the report")
        ts = sent.event["ts"]
        assert await r.final_reaction("D1", ts) == "white_check_mark"
        messages = r.bot_messages("D1", ts)
        assert len(messages) >= 3
        sections = [
            b["text"]["text"] for m in messages for b in m["blocks"] if b["type"] == "section"
        ]
        assert all(len(s) <= 3000 for s in sections)
        assert all(len(m["blocks"]) <= 50 and len(m["text"]) < 4000 for m in messages)
        escaped = summary.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
        assert escaped in "".join(sections)  # nothing lost, nothing unescaped
        notes = [m["blocks"][-1]["elements"][0]["text"] for m in messages]
        assert notes[0].startswith(f"part 1 of {len(messages)}")
        assert "agent `a" in notes[-1]


async def test_an_analyst_drafting_a_developer_shows_both_in_the_thread(rig: RigFactory) -> None:
    async with rig(demo_script) as r:
        sent = await r.say("plan: a settings page")
        ts = sent.event["ts"]
        assert await r.final_reaction("D1", ts, timeout=60) == "white_check_mark"

        shown = [message_text(m) for m in r.bot_messages("D1", ts)]
        task = await r.orchestrator.tasks.find_task(ThreadRef("D1", ts))
        assert task is not None
        analyst, developer = task.dispatches
        assert (analyst.role, developer.role) == ("product-analyst", "developer")
        assert developer.parent_id == analyst.agent_id
        # The drafted developer announced itself, then its result replaced the announcement.
        announced = [
            c.params["text"]
            for c in r.slack.calls("chat.postMessage")
            if "drafted *developer*" in str(c.params.get("text"))
        ]
        assert announced and f"`{developer.agent_id}`" in announced[0]
        assert "Implement step 1 of the plan" in announced[0]
        dev_result = next(s for s in shown if "*developer* finished" in s)
        assert f"drafted by product-analyst {analyst.agent_id}" in dev_result
        # The thread ends in the analyst's result, which carries the developer's outcome.
        assert "*product-analyst* finished" in shown[-1]
        assert f"drafted developer {developer.agent_id}, which reported: Done:" in shown[-1]


async def test_a_follow_up_waits_for_the_running_agent_and_the_thread_says_so(
    rig: RigFactory,
) -> None:
    # The agents are held: a follow-up's prompt, with the first result, reaching the model
    # through the real CLI is proved by
    # test_a_mention_in_a_channel_starts_one_task_and_a_reply_follows_up.
    async with rig(runtime=HeldRuntime()) as r:
        sent = await r.say("do the first step")
        ts = sent.event["ts"]
        await r.held.wait_started(1, WAIT)
        reply = await r.say("then the second step", thread_ts=ts)
        notice = await r.slack.wait_for(
            lambda: [m for m in r.bot_messages("D1", ts) if "⏳ Got it" in m["text"]]
        )
        assert "developer `a" in notice[0]["text"]
        assert "eyes" in r.slack.reactions("D1", reply.event["ts"])
        assert len(r.held.started) == 1  # the follow-up has not started
        r.held.release()
        assert await r.final_reaction("D1", reply.event["ts"]) == "white_check_mark"
        _, second = r.held.started
        assert "did: do the first step" in second.prompt


async def test_a_failed_run_says_what_failed_which_agent_and_what_to_do(rig: RigFactory) -> None:
    def script(request: ModelRequest) -> Turn:
        raise RuntimeError("the model is down")

    async with rig(script) as r:
        sent = await r.say("fix the login bug")
        ts = sent.event["ts"]
        assert await r.final_reaction("D1", ts) == "x"
        shown = r.bot_text("D1", ts)
        [record] = (await latest_task(r.orchestrator)).dispatches
        assert record.status == "failed"
        assert f"❌ *developer* failed (agent `{record.agent_id}`)" in shown
        assert "*What failed:*" in shown and "the model is down" in shown
        assert "*What to do next:* reply in this thread to try again" in shown
        assert "Traceback" not in shown


async def test_shutdown_stops_the_agent_and_starts_no_queued_follow_up(rig: RigFactory) -> None:
    # The agent is held: that a shutdown leaves no CLI process is proved by tests/harness/agents/
    # test_runs.py::test_shutdown_marks_running_dispatches_interrupted_and_leaves_no_child.
    async with rig(runtime=HeldRuntime()) as r:
        sent = await r.say("fix it slowly")
        ts = sent.event["ts"]
        await r.held.wait_started(1, WAIT)
        reply = await r.say("and then the docs", thread_ts=ts)
        await r.slack.wait_for(lambda: "⏳ Got it" in r.bot_text("D1", ts))

        await r.server.stop("the test stopped the bot")

        assert len(r.held.started) == 1  # the queued follow-up never started an agent
        [record] = (await latest_task(r.orchestrator)).dispatches
        assert record.status == "interrupted"
        shown = r.bot_text("D1", ts)
        assert f"⏸️ *developer* was interrupted (agent `{record.agent_id}`)" in shown
        assert "I am shutting down, so I did not start on this." in shown
        assert r.slack.reactions("D1", ts) >= {"x"}
        assert r.slack.reactions("D1", reply.event["ts"]) >= {"x"}
