"""Agents talking to the thread: ask_human answered by a reply or a button, timeouts, several
agents waiting, progress updates, and questions in a result answered by the next reply."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest

from bot.questions import ACTION_PREFIX, pick_question
from bot.settings import Mode
from harness.agents.questions import Question
from harness.testing.scripted_model import ModelRequest, Turn
from tests.bot.conftest import WAIT, Rig, RigFactory, message_text
from tests.support import latest_task

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

ASK = "mcp__harness__ask_human"
PROGRESS = "mcp__harness__update_progress"
DRAFT = "mcp__harness__draft_agent"
AWAIT = "mcp__harness__await_agent"


def asking(question: str, **extra: Any) -> Callable[[ModelRequest], Turn]:
    """A worker that asks once, then finishes with the answer (or that none came)."""

    def script(request: ModelRequest) -> Turn:
        if not request.tool_results:
            return Turn.call(ASK, question=question, **extra)
        reply = request.tool_results[-1].json() or {}
        if reply.get("timedOut"):
            return Turn.finish("No answer, went with the default")
        return Turn.finish(f"Using {reply['answer']} (from {reply['answeredBy']})")

    return script


async def question_message(r: Rig, thread_ts: str, count: int = 1) -> list[dict[str, Any]]:
    def asked() -> list[dict[str, Any]] | None:
        found = [m for m in r.bot_messages("D1", thread_ts) if "asks:" in message_text(m)]
        return found if len(found) >= count else None

    return await r.slack.wait_for(asked, WAIT)


async def test_a_thread_reply_answers_the_question_and_reaches_the_agent(
    rig: RigFactory,
) -> None:
    async with rig(asking("Which database?")) as r:
        sent = await r.say("set up the storage")
        ts = sent.event["ts"]
        [question] = await question_message(r, ts)
        assert "developer* (agent `a" in message_text(question)
        assert "Which database?" in message_text(question)

        def status_waits() -> bool:
            return any(
                "waiting for an answer" in str(c.params.get("text"))
                for c in r.slack.calls("chat.update")
            )

        await r.slack.wait_for(status_waits, WAIT)
        reply = await r.say("Postgres please", thread_ts=ts)

        assert await r.final_reaction("D1", ts) == "white_check_mark"
        assert "Using Postgres please (from U1)" in r.bot_text("D1", ts)
        assert "speech_balloon" in r.slack.reactions("D1", reply.event["ts"])
        assert len(r.runs()) == 1  # the reply answered; it started no follow-up
        settled = next(m for m in r.bot_messages("D1", ts) if m["ts"] == question["ts"])
        assert "<@U1> answered: Postgres please" in message_text(settled)


@pytest.mark.parametrize("mode", ["http", "socket"])
async def test_a_button_answers_the_question(rig: RigFactory, mode: Mode) -> None:
    async with rig(asking("Which database?", options=["Postgres", "SQLite"]), mode=mode) as r:
        ts = (await r.say("set up the storage")).event["ts"]
        [question] = await question_message(r, ts)
        [actions] = [b for b in question["blocks"] if b["type"] == "actions"]
        button = actions["elements"][1]
        assert button["text"]["text"] == "SQLite"

        await r.slack.block_action(
            "U2", "D1", question["ts"], button["action_id"], button["value"], thread_ts=ts
        )

        assert await r.final_reaction("D1", ts) == "white_check_mark"
        assert "Using SQLite (from U2)" in r.bot_text("D1", ts)


async def test_a_question_nobody_answers_times_out_and_the_agent_goes_on(
    rig: RigFactory,
) -> None:
    async with rig(asking("Anyone there?", timeoutSeconds=1)) as r:
        ts = (await r.say("set up the storage")).event["ts"]
        assert await r.final_reaction("D1", ts) == "white_check_mark"
        text = r.bot_text("D1", ts)
        assert "No answer, went with the default" in text
        assert "No answer in time" in text


async def test_two_agents_waiting_in_one_thread_are_told_apart(rig: RigFactory) -> None:
    def script(request: ModelRequest) -> Turn:
        if DRAFT not in request.tool_names:
            return asking(f"Colour for {request.first_user_text.splitlines()[-1]}?")(request)
        results = request.all_tool_results
        if not results:
            return Turn(
                tool_calls=tuple(
                    Turn.call(DRAFT, role="developer", prompt=p).tool_calls[0]
                    for p in ("the header", "the footer")
                )
            )
        if len(results) == 2:
            ids = [r.json()["agentId"] for r in results]
            return Turn(tool_calls=tuple(Turn.call(AWAIT, agentId=i).tool_calls[0] for i in ids))
        return Turn.finish(" / ".join(r.json()["result"]["summary"] for r in results[2:]))

    async with rig(script) as r:
        ts = (await r.say("plan: colours")).event["ts"]
        questions = await question_message(r, ts, count=2)
        footer = next(m for m in questions if "the footer" in message_text(m))
        footer_agent = message_text(footer).split("agent `")[1].split("`")[0]

        await r.say(f"{footer_agent}: blue", thread_ts=ts)
        await r.say("red", thread_ts=ts)

        assert await r.final_reaction("D1", ts) == "white_check_mark"
        final = r.bot_text("D1", ts)
        assert "Using red (from U1) / Using blue (from U1)" in final


async def test_progress_updates_are_throttled_and_the_last_one_shows(rig: RigFactory) -> None:
    release = asyncio.Event()

    async def script(request: ModelRequest) -> Turn:
        if not request.tool_results:
            return Turn(
                tool_calls=tuple(
                    Turn.call(PROGRESS, message=f"step {n} of 5", percent=n * 20).tool_calls[0]
                    for n in range(1, 6)
                )
            )
        await asyncio.wait_for(release.wait(), WAIT)
        return Turn.finish("all steps done")

    async with rig(script) as r:
        ts = (await r.say("do five steps")).event["ts"]

        def shows_last() -> bool:
            return any("step 5 of 5 (100%)" in str(c.params) for c in r.slack.calls("chat.update"))

        await r.slack.wait_for(shows_last, WAIT)
        progress_edits = [c for c in r.slack.calls("chat.update") if "step " in str(c.params)]
        assert len(progress_edits) < 5  # five reports, fewer edits
        record = (await latest_task(r.orchestrator)).dispatches[0]
        assert record.progress is not None and record.progress.message == "step 5 of 5"
        release.set()
        assert await r.final_reaction("D1", ts) == "white_check_mark"


async def test_questions_in_a_result_go_back_to_the_same_role_with_the_answer(
    rig: RigFactory,
) -> None:
    def script(request: ModelRequest) -> Turn:
        if "design it for Postgres" in request.first_user_text:
            return Turn.finish("Schema designed for Postgres")
        return Turn.finish("Storage layer drafted", questions=["Which database?"])

    async with rig(script) as r:
        ts = (await r.say("build the storage layer")).event["ts"]
        await r.final_reaction("D1", ts)
        assert "1. Which database?" in r.bot_text("D1", ts)

        reply = await r.say("design it for Postgres", thread_ts=ts)  # "design" routes elsewhere
        await r.final_reaction("D1", reply.event["ts"])

        task = await latest_task(r.orchestrator)
        assert [d.role for d in task.dispatches] == ["developer", "developer"]
        prompt = r.runs()[-1].first_user_text
        assert "Which database?" in prompt
        assert prompt.index("Which database?") < prompt.index("design it for Postgres")


def question(agent: str) -> Question:
    return Question(f"q{agent}", agent, "developer", "t", "?", (), "2026-01-01T00:00:00Z", 5)


def test_a_reply_naming_an_agent_answers_that_agents_question() -> None:
    pending = [question("a111111"), question("a222222")]
    assert pick_question(pending, "a222222: blue") == (pending[1], "blue")
    assert pick_question(pending, "@a222222 blue") == (pending[1], "blue")
    assert pick_question(pending, "blue") == (pending[0], "blue")
    assert pick_question(pending, "a999999: blue") == (pending[0], "a999999: blue")
    assert pick_question([], "blue") is None
    assert ACTION_PREFIX == "harness_answer_"


def checks_python(request: ModelRequest) -> Turn:
    """Runs a command no role allows (so it needs approval), then reports its output."""
    if not request.all_tool_results:
        return Turn.call("Bash", command="git push -h")
    return Turn.finish(f"ran: {request.all_tool_results[-1].text.strip()}")


async def test_a_command_needing_approval_is_asked_in_the_thread_and_runs_once_allowed(
    rig: RigFactory,
) -> None:
    async with rig(checks_python) as r:
        ts = (await r.say("push the work")).event["ts"]
        [question] = await question_message(r, ts)
        assert "asks to run Bash: `git push -h`. Allow it?" in message_text(question)
        await r.slack.wait_for(lambda: "waiting for approval" in r.bot_text("D1", ts), WAIT)
        [actions] = [b for b in question["blocks"] if b["type"] == "actions"]
        labels = [e["text"]["text"] for e in actions["elements"]]
        assert labels == ["Allow once", "Allow for this task", "Deny"]
        allow = actions["elements"][0]

        await r.slack.block_action(
            "U1", "D1", question["ts"], allow["action_id"], allow["value"], thread_ts=ts
        )

        assert await r.final_reaction("D1", ts) == "white_check_mark"
        assert "usage: git push" in r.bot_text("D1", ts)
        audit = await r.orchestrator.tasks.audit_log((await latest_task(r.orchestrator)).slug)
        [decision] = [e for e in audit if e["tool"] == "approval"]
        assert (decision["outcome"], decision["decidedBy"]) == ("allowed", "U1 (Allow once)")


async def test_an_approval_is_decided_only_by_the_requester_or_an_admin_from_its_thread(
    rig: RigFactory,
) -> None:
    async with rig(checks_python) as r:
        ts = (await r.say("<@UBOT> push the work", user="U1", channel="C1")).event["ts"]

        def asked() -> list[dict[str, Any]] | None:
            found = [m for m in r.bot_messages("C1", ts) if "asks to run" in message_text(m)]
            return found or None

        [question] = await r.slack.wait_for(asked, WAIT)
        [actions] = [b for b in question["blocks"] if b["type"] == "actions"]
        allow = actions["elements"][0]

        # Someone else in the thread: refused, the approval stays open.
        await r.slack.block_action(
            "U2", "C1", question["ts"], allow["action_id"], allow["value"], thread_ts=ts
        )
        [refusal] = await r.slack.wait_for(lambda: r.slack.ephemeral("U2"), WAIT)
        assert "Only <@U1> and the bot's admins can approve" in refusal["text"]
        # The requester, but clicking from another thread: refused too.
        await r.slack.block_action(
            "U1", "C1", question["ts"], allow["action_id"], allow["value"], thread_ts="1.000001"
        )
        await r.slack.wait_for(
            lambda: [e for e in r.slack.ephemeral("U1") if "another thread" in e["text"]], WAIT
        )
        assert r.orchestrator.humans.pending_questions()  # still waiting for a proper decision

        await r.slack.block_action(
            "U1", "C1", question["ts"], allow["action_id"], allow["value"], thread_ts=ts
        )
        assert await r.final_reaction("C1", ts) == "white_check_mark"
        assert "usage: git push" in r.bot_text("C1", ts)


async def test_a_deny_reply_in_the_thread_refuses_the_command_and_the_agent_hears_why(
    rig: RigFactory,
) -> None:
    async with rig(checks_python) as r:
        ts = (await r.say("push the work")).event["ts"]
        await question_message(r, ts)
        await r.say("deny: not on the build machine", thread_ts=ts)

        assert await r.final_reaction("D1", ts) == "white_check_mark"
        assert "denied by U1: not on the build machine" in r.bot_text("D1", ts)
