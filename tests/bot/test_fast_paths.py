"""The bot's fast tier: what needs no Claude Code CLI, run with agents held by HeldRuntime.

Intake rules (what is ignored, refused or deduplicated), signatures and the /harness command,
asserted as a Slack user sees them: HTTP statuses, messages, reactions, ephemeral answers.
A request that proves the bot is alive comes last, so the ones before it were handled first.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import time
from typing import Any

import pytest

from bot.access import CHANNEL_REFUSAL, REFUSAL
from bot.commands import HELP
from bot.testing.slack_emulator import SlackEmulator
from harness.config.settings import SlackSettings
from harness.project import Project
from harness.tasks.model import ThreadRef
from harness.testing.held_runtime import HeldRuntime
from tests.bot.conftest import Rig, RigFactory, calls_with

pytestmark = pytest.mark.anyio

WAIT = 10.0  # bounded waits: nothing here starts a process


def ephemeral_with(slack: SlackEmulator, user: str, needle: str) -> list[dict[str, Any]]:
    return [e for e in slack.ephemeral(user) if needle in str(e.get("text"))]


async def started_prompts(r: Rig, count: int) -> list[str]:
    """Once the runtime ran ``count`` agents: the assignment (prompt's last line) of each agent
    it ran, in the order they started."""
    await r.held.wait_started(count, WAIT)
    return [spec.prompt.strip().splitlines()[-1] for spec in r.held.started]


async def test_a_dm_starts_a_held_agent_whose_result_replaces_the_status(rig: RigFactory) -> None:
    async with rig(runtime=HeldRuntime()) as r:
        sent = await r.say("fix the login bug")
        ts = sent.event["ts"]
        assert sent.status == 200
        assert await started_prompts(r, 1) == ["fix the login bug"]
        await r.slack.wait_for(lambda: "eyes" in r.slack.reactions("D1", ts), WAIT)
        await r.slack.wait_for(lambda: "developer is working" in r.bot_text("D1", ts), WAIT)

        r.held.release()
        assert await r.final_reaction("D1", ts, WAIT) == "white_check_mark"
        shown = r.bot_text("D1", ts)
        assert "✅ *developer* finished" in shown
        assert "did: fix the login bug" in shown
        assert len(r.bot_messages("D1", ts)) == 1  # the status message became the result


async def test_bot_messages_edits_deletions_joins_and_chatter_start_nothing(
    rig: RigFactory,
) -> None:
    async with rig(runtime=HeldRuntime()) as r:
        slack = r.slack
        chatter = await r.say("lunch anyone?", user="U2", channel="C1")  # no mention
        reply = await r.say("me!", user="U3", channel="C1", thread_ts=chatter.event["ts"])
        from_bot = {
            "type": "message",
            "channel": "D1",
            "channel_type": "im",
            "user": "U9",
            "bot_id": "B9",
            "text": "fix everything",
            "ts": "1700000099.000100",
        }
        bot_subtype = {**from_bot, "subtype": "bot_message", "ts": "1700000099.000200"}
        del bot_subtype["bot_id"]
        own = {**from_bot, "user": "UBOT", "bot_id": "BBOT", "ts": "1700000099.000300"}
        person_joins = {
            "type": "message",
            "subtype": "channel_join",
            "channel": "C1",
            "channel_type": "channel",
            "user": "U5",
            "text": "<@U5> has joined the channel",
            "ts": "1700000099.000400",
        }
        # The bot's own join names the bot, like a mention would.
        bot_joins = {**person_joins, "user": "UBOT", "text": "<@UBOT> has joined the channel"}
        bot_joins["ts"] = "1700000099.000500"
        delivered = [
            chatter,
            reply,
            *[await slack.deliver_event(e) for e in (from_bot, bot_subtype, own)],
            *[await slack.deliver_event(e) for e in (person_joins, bot_joins)],
        ]
        typo = await r.say("fix the typo", user="U4", channel="C2")
        delivered.append(typo)
        delivered.append(await slack.user_edit("U4", "C2", typo.event["ts"], "<@UBOT> fix it"))
        delivered.append(await slack.user_delete("C2", typo.event["ts"]))
        assert [d.status for d in delivered] == [200] * len(delivered)  # acked: no retries

        alive = await r.say("fix the login bug")
        assert await started_prompts(r, 1) == ["fix the login bug"]
        await slack.wait_for(lambda: "eyes" in slack.reactions("D1", alive.event["ts"]), WAIT)
        for channel, ts in (("C1", chatter.event["ts"]), ("C1", reply.event["ts"])):
            assert slack.reactions(channel, ts) == set()
        assert {c.params["channel"] for c in slack.calls("chat.postMessage")} == {"D1"}
        assert {c.params["channel"] for c in slack.calls("reactions.add")} == {"D1"}
        assert slack.ephemeral() == []
        assert len(await r.orchestrator.tasks.task_summaries()) == 1


async def test_a_forged_or_stale_signature_gets_401_and_starts_nothing(
    rig: RigFactory,
) -> None:
    async with rig(runtime=HeldRuntime()) as r:
        event = {
            "type": "event_callback",
            "event_id": "EvFORGED",
            "event": {
                "type": "message",
                "channel": "D7",
                "channel_type": "im",
                "user": "U1",
                "text": "delete the database",
                "ts": "1700000050.000100",
            },
        }
        body = json.dumps(event).encode()
        forged, _ = await r.slack.post_signed(
            body, content_type="application/json", signature_override="v0=" + "0" * 64
        )
        # Correctly signed, but 10 minutes old: a replayed request.
        stale = str(int(time.time()) - 600)
        replayed, _ = await r.slack.post_signed(
            body, content_type="application/json", timestamp_override=stale
        )
        command = b"command=%2Fharness&text=help&user_id=U1&channel_id=C1"
        forged_command, _ = await r.slack.post_signed(
            command,
            content_type="application/x-www-form-urlencoded",
            signature_override="v0=" + "f" * 64,
        )
        assert (forged, replayed, forged_command) == (401, 401, 401)

        await r.say("fix the login bug")
        assert await started_prompts(r, 1) == ["fix the login bug"]
        assert r.slack.reactions("D7", "1700000050.000100") == set()
        assert not [c for c in r.slack.calls() if c.params.get("channel") == "D7"]


async def test_people_and_channels_outside_the_allowlists_are_refused(rig: RigFactory) -> None:
    allow = SlackSettings(allowed_users=("U1",), allowed_channels=("C1",), admins=("UADMIN",))
    async with rig(runtime=HeldRuntime(), slack_settings=allow) as r:
        slack = r.slack
        stranger = await r.say("fix the login bug", user="U2", channel="D2")
        [refusal] = await slack.wait_for(lambda: ephemeral_with(slack, "U2", REFUSAL), WAIT)
        assert refusal["channel"] == "D2"
        elsewhere = await r.say("<@UBOT> fix the build", channel="C2")
        [moved] = await slack.wait_for(lambda: ephemeral_with(slack, "U1", CHANNEL_REFUSAL), WAIT)
        assert moved["channel"] == "C2"
        command = await slack.slash_command("/harness", "list", "U2", "C1")
        assert command.status == 200
        assert command.response_payload["text"] == REFUSAL
        in_other_channel = await slack.slash_command("/harness", "list", "U1", "C2")
        assert in_other_channel.response_payload["text"] == CHANNEL_REFUSAL

        allowed = await r.say("fix the tests")  # U1 in a DM: allowed anywhere DMs are
        admin = await r.say("<@UBOT> fix the docs", user="UADMIN", channel="C1")
        assert sorted(await started_prompts(r, 2)) == ["fix the docs", "fix the tests"]
        await slack.wait_for(lambda: "eyes" in slack.reactions("D1", allowed.event["ts"]), WAIT)
        await slack.wait_for(lambda: "eyes" in slack.reactions("C1", admin.event["ts"]), WAIT)
        assert slack.reactions("D2", stranger.event["ts"]) == set()
        assert slack.reactions("C2", elsewhere.event["ts"]) == set()
        assert not [m for m in slack.messages("D2") + slack.messages("C2") if m.get("bot_id")]


async def test_harness_help_and_bad_input_are_answered_in_the_ack(rig: RigFactory) -> None:
    async with rig(runtime=HeldRuntime()) as r:
        slack = r.slack
        for text in ("", "help", "HELP me"):
            helped = await slack.slash_command("/harness", text, "U1", "C1")
            assert helped.status == 200
            assert helped.response_payload["text"] == HELP
        usage = await slack.slash_command("/harness", "kill <@U2> & co", "U1", "C1")
        assert usage.response_payload["text"].startswith("Usage: `/harness kill <agentId>`")
        odd = await slack.slash_command("/harness", "kill <b>", "U1", "C1")
        assert "`&lt;b&gt;` is not an agent id" in odd.response_payload["text"]
        unknown = await slack.slash_command("/harness", "dance", "U1", "C1")
        assert unknown.response_payload["text"].startswith("Unknown command `dance`.")
        assert HELP in unknown.response_payload["text"]
        assert [e["text"] for e in slack.ephemeral("U1")][:2] == [HELP, HELP]
        assert not slack.calls("chat.postMessage")
        assert r.held.started == []


async def test_harness_list_shows_held_agents_and_kill_stops_them_for_requester_and_admins(
    rig: RigFactory,
) -> None:
    admins = SlackSettings(admins=("UADMIN",))
    async with rig(runtime=HeldRuntime(), slack_settings=admins) as r:
        slack = r.slack
        mine = await r.say("fix it slowly")
        theirs = await r.say("write the docs slowly", user="U3", channel="D3")
        await r.held.wait_started(2, WAIT)
        agents = {a.agent_id: a for a in r.orchestrator.agents()}
        by_prompt = {s.prompt.strip().splitlines()[-1]: s.agent_id for s in r.held.started}
        mine_id, theirs_id = by_prompt["fix it slowly"], by_prompt["write the docs slowly"]

        await slack.slash_command("/harness", "list", "U2", "C1")
        [listing] = await slack.wait_for(lambda: ephemeral_with(slack, "U2", "*Agents*"), WAIT)
        text = listing["text"]
        assert text.startswith("*Agents*: 2 running, 0 queued")
        for agent_id in (mine_id, theirs_id):
            assert f"*developer* `{agent_id}`" in text
            assert f"task `{agents[agent_id].task_slug}`" in text

        unknown = await slack.slash_command("/harness", "kill a000000", "U1", "D1")
        assert "No running or queued agent `a000000`" in unknown.response_payload["text"]
        refused = await slack.slash_command("/harness", f"kill {mine_id}", "U2", "D2")
        assert refused.response_payload["text"].startswith(f"You can't stop `{mine_id}`: only")
        assert "<@U1>" in refused.response_payload["text"]
        assert r.orchestrator.agent(mine_id) is not None  # still running

        killed = await slack.slash_command("/harness", f"kill {mine_id}", "U1", "D1")
        assert killed.response_payload["text"].startswith(f"Stopping developer `{mine_id}`")
        by_admin = await slack.slash_command("/harness", f"kill {theirs_id}", "UADMIN", "C1")
        assert by_admin.response_payload["text"].startswith(f"Stopping developer `{theirs_id}`")

        for user, channel, sent in (("U1", "D1", mine), ("UADMIN", "D3", theirs)):
            ts = sent.event["ts"]
            assert await r.final_reaction(channel, ts, WAIT) == "x"
            shown = r.bot_text(channel, ts)
            assert f"⏹️ *developer* was stopped by <@{user}>" in shown
            assert "*What to do next:*" in shown
        assert (await r.orchestrator.record(mine_id)).status == "killed"
        assert r.orchestrator.agents() == []


async def test_slack_retries_and_the_mention_pair_run_once_per_message(rig: RigFactory) -> None:
    async with rig(runtime=HeldRuntime()) as r:
        slack = r.slack
        r.held.release()  # agents finish as soon as they start
        sent = await r.say("<@UBOT> fix the build", channel="C1")
        ts = sent.event["ts"]
        assert sent.mention is not None  # Slack sent message + app_mention for it
        retried = await slack.deliver_event(sent.event, retry_of=sent)
        mention_retry = await slack.deliver_event(sent.mention.event, retry_of=sent.mention)
        assert await r.final_reaction("C1", ts, WAIT) == "white_check_mark"

        # A retried follow-up: its thread is bound, so only the event id tells it apart.
        reply = await r.say("and the docs", channel="C1", thread_ts=ts)
        reply_retry = await slack.deliver_event(reply.event, retry_of=reply)
        last = await r.say("and the tests", channel="C1", thread_ts=ts)
        # One run at a time per thread, in order: a duplicate would have run before this one.
        assert await r.final_reaction("C1", last.event["ts"], WAIT) == "white_check_mark"

        statuses = [d.status for d in (retried, mention_retry, reply_retry)]
        assert statuses == [200, 200, 200]
        assert await started_prompts(r, 3) == ["fix the build", "and the docs", "and the tests"]
        for message in (sent, reply):
            # 👀 then ✅, once each.
            assert len(calls_with(slack, "reactions.add", message.event["ts"])()) == 2
        assert r.bot_text("C1", ts).count("*developer* finished") == 3
        task = await r.orchestrator.tasks.find_task(ThreadRef("C1", ts))
        assert task is not None and len(task.dispatches) == 3


async def test_events_acked_just_before_a_shutdown_still_get_an_answer(rig: RigFactory) -> None:
    async with rig(runtime=HeldRuntime()) as r:
        sent = await asyncio.gather(*(r.say(f"job {n}", channel=f"D{n}") for n in range(20)))
        assert all(s.status == 200 for s in sent)
        # Acked, perhaps not handled yet: stopping now must not drop any of them.
        await r.server.stop("the bot was stopped for a test")
        for n, s in enumerate(sent):
            ts = s.event["ts"]
            assert await r.final_reaction(f"D{n}", ts, WAIT) == "x"
            shown = r.bot_text(f"D{n}", ts)
            assert "shutting down" in shown or "interrupted" in shown, shown


async def test_a_follow_up_on_a_task_over_its_budget_is_refused_saying_why_and_starts_nothing(
    rig: RigFactory, project: Project
) -> None:
    mcp = dataclasses.replace(project.config.mcp, task_budget_usd=0.005)
    async with rig(runtime=HeldRuntime(), mcp=mcp) as r:
        r.held.release()
        ts = (await r.say("fix the login bug")).event["ts"]
        assert await r.final_reaction("D1", ts, WAIT) == "white_check_mark"  # spent $0.01

        again = await r.say("and the signup page", thread_ts=ts)

        assert await r.final_reaction("D1", again.event["ts"], WAIT) == "x"
        shown = r.bot_text("D1", ts)
        assert "has spent $0.0100 of its $0.01 budget" in shown
        assert "mcp.taskBudgetUsd" in shown
        assert len(r.held.started) == 1
        task = await r.orchestrator.tasks.find_task(ThreadRef("D1", ts))
        assert task is not None and len(task.dispatches) == 1


async def test_the_person_who_asked_is_kept_with_the_task_and_each_message(
    rig: RigFactory,
) -> None:
    async with rig(runtime=HeldRuntime()) as r:
        r.held.release()
        ts = (await r.say("<@UBOT> fix the login bug", user="U1", channel="C1")).event["ts"]
        assert await r.final_reaction("C1", ts, WAIT) == "white_check_mark"
        reply = await r.say("and the signup page", user="U2", channel="C1", thread_ts=ts)
        assert await r.final_reaction("C1", reply.event["ts"], WAIT) == "white_check_mark"

        task = await r.orchestrator.tasks.find_task(ThreadRef("C1", ts))
        assert task is not None and task.requester == "U1"
        assert [d.requested_by for d in task.dispatches] == ["U1", "U2"]


async def test_harness_tasks_shows_a_person_their_channels_tasks_and_their_own_dms_only(
    rig: RigFactory,
) -> None:
    async with rig(runtime=HeldRuntime()) as r:
        r.held.release()
        mine = (await r.say("fix my private thing", user="U1", channel="D1")).event["ts"]
        assert await r.final_reaction("D1", mine, WAIT) == "white_check_mark"
        shared = await r.say("<@UBOT> fix the shared page", user="U1", channel="C1")
        assert await r.final_reaction("C1", shared.event["ts"], WAIT) == "white_check_mark"

        r.slack.join("U2", "C1")  # U3 is in no channel of these tasks
        listings: dict[str, str] = {}
        for user in ("U1", "U2", "U3"):
            await r.slack.slash_command("/harness", "tasks", user, "C9")
            [listing] = await r.slack.wait_for(
                lambda user=user: [  # type: ignore[misc]
                    e for e in r.slack.ephemeral(user) if "tasks" in e["text"].lower()
                ],
                WAIT,
            )
            listings[user] = listing["text"]

    assert "fix my private thing" in listings["U1"] and "fix the shared page" in listings["U1"]
    assert "fix my private thing" not in listings["U2"]
    assert "fix the shared page" in listings["U2"]
    assert listings["U3"].startswith("No tasks of yours or of your channels yet.")


async def test_an_invisible_message_is_answered_and_a_long_one_is_taken_with_a_notice(
    rig: RigFactory,
) -> None:
    async with rig(runtime=HeldRuntime()) as r:
        r.held.release()
        await r.say("\u200b\u200b\u2060", user="U1", channel="D1")
        [unseen] = await r.slack.wait_for(lambda: r.slack.ephemeral("U1") or None, WAIT)
        assert "only invisible characters" in unseen["text"]
        assert r.held.started == []

        long = (await r.say("z" * 40_100, user="U1", channel="D1")).event["ts"]
        assert await r.final_reaction("D1", long, WAIT) == "white_check_mark"
        said = [e["text"] for e in r.slack.ephemeral("U1")]
        assert any("longer than 40,000 characters" in text for text in said)
        [spec] = r.held.started
        assert "100 more characters were not received" in spec.prompt
