"""Slack's agent sessions: a session per task thread whose status follows its agents, and the
native Stop button. The real Bolt app against the emulator; agents run by the real Claude
Code CLI against the scripted model (slow), or held until released (fast)."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from bot.commands import HELD_ELSEWHERE
from bot.sessions import (
    ENABLE_HINT,
    HELD_BY_A_STOPPED_REPLICA,
    NO_TASK,
    NOTHING_TO_STOP,
    SUBSCRIBE_HINT,
    session_status,
    session_title,
    warnings_of,
)
from bot.settings import BotOptions, Mode
from harness.agents.pool import AgentInfo
from harness.config.settings import SlackSettings
from harness.tasks.files import FileTaskStore
from harness.testing.held_runtime import HeldRuntime
from harness.testing.processes import claude_children
from harness.testing.records import make_record
from harness.testing.scripted_model import ModelRequest, Turn
from tests.bot.conftest import WAIT, Rig, RigFactory, message_text
from tests.bot.test_questions import asking, checks_python, question_message
from tests.support import latest_task

pytestmark = pytest.mark.anyio

STREAMING = BotOptions(status_interval=0.2, stream_replies=True)
ADMINS = SlackSettings(admins=("UADMIN",))


def slowly(request: ModelRequest) -> Turn:
    """An agent that works until it is stopped."""
    return Turn(text="Working on it.", stall_seconds=120)


def hint_lines(caplog: pytest.LogCaptureFixture, hint: str) -> list[logging.LogRecord]:
    first_words = hint.split("(")[0]
    return [r for r in caplog.records if r.getMessage().startswith(first_words)]


async def status_becomes(r: Rig, channel: str, ts: str, status: str) -> None:
    await r.slack.wait_for(lambda: r.slack.agent.session_status(channel, ts) == status, WAIT)


# ------------------------------------------------------------------ pure parts


def live(state: Any = "running") -> AgentInfo:
    return AgentInfo("a1", "developer", "t", "/w", None, 0, state, "2026", "2026", 1.0, "working")


def test_a_sessions_status_follows_the_tasks_agents_and_its_people() -> None:
    assert session_status([live()], waits_for_a_person=False) == "processing"
    assert session_status([live("queued")], waits_for_a_person=False) == "processing"
    assert session_status([live("waiting")], waits_for_a_person=True) == "suspended"
    assert session_status([], waits_for_a_person=False) == "active"


def test_the_title_is_the_request_on_one_line_within_slacks_limit() -> None:
    assert session_title("fix  the\nlogin page") == "fix the login page"
    assert len(session_title("x" * 500)) == 200


def test_warnings_are_read_from_both_places_slack_puts_them() -> None:
    both = {"ok": True, "warning": "a,b", "response_metadata": {"warnings": ["c"]}}
    assert warnings_of(both) == {"a", "b", "c"}
    assert warnings_of({"ok": True}) == set()


# ------------------------------------------------------------------ Stop


@pytest.mark.slow
async def test_stop_during_a_run_ends_the_agents_process_and_the_session_leaves_processing(
    rig: RigFactory,
) -> None:
    async with rig(slowly, options=STREAMING) as r:
        ts = (await r.say("fix the login page slowly")).event["ts"]
        await r.model.wait_for_request(timeout=WAIT)
        await status_becomes(r, "D1", ts, "processing")
        children = claude_children()

        await r.slack.agent.press_stop("U1", "D1", ts)
        await r.slack.wait_for(lambda: r.slack.agent.session_status("D1", ts) != "processing", WAIT)
        gone = not claude_children() & children
        assert await r.final_reaction("D1", ts) == "x"
        shown = r.bot_text("D1", ts)
        session = r.slack.agent.session("D1", ts)
        [record] = (await latest_task(r.orchestrator)).dispatches

    assert children and gone
    assert record.status == "killed"
    assert "<@U1> pressed Stop: stopping developer" in shown
    assert "was stopped by <@U1>" in shown
    assert "stopped from Slack with the Stop button" in shown
    assert session is not None
    assert session.history == ["processing", "active"]
    assert (session.title, session.initiator) == ("fix the login page slowly", "U1")


@pytest.mark.slow
async def test_stop_during_an_approval_wait_ends_the_suspended_session(rig: RigFactory) -> None:
    async with rig(checks_python) as r:
        ts = (await r.say("push the work")).event["ts"]
        await question_message(r, ts)
        await status_becomes(r, "D1", ts, "suspended")

        await r.slack.agent.press_stop("U1", "D1", ts)
        assert await r.final_reaction("D1", ts) == "x"
        await status_becomes(r, "D1", ts, "active")
        [record] = (await latest_task(r.orchestrator)).dispatches
        pending = r.orchestrator.humans.pending_questions()

    assert record.status == "killed"
    assert pending == []
    assert "usage: git push" not in r.bot_text("D1", ts)  # the command never ran


async def test_stop_with_nothing_running_is_answered_and_changes_nothing(rig: RigFactory) -> None:
    async with rig(runtime=HeldRuntime()) as r:
        r.held.release()
        ts = (await r.say("fix the login page")).event["ts"]
        assert await r.final_reaction("D1", ts) == "white_check_mark"
        await status_becomes(r, "D1", ts, "active")
        before = r.bot_messages("D1", ts)
        calls = len(r.slack.calls("agents.sessions.setStatus"))

        await r.slack.agent.press_stop("U1", "D1", ts)
        [answer] = await r.slack.wait_for(lambda: r.slack.ephemeral("U1"), WAIT)

        assert answer["text"] == NOTHING_TO_STOP
        assert r.bot_messages("D1", ts) == before
        assert len(r.slack.calls("agents.sessions.setStatus")) == calls
        assert r.slack.agent.session_status("D1", ts) == "active"


async def test_stop_also_keeps_the_follow_ups_waiting_in_the_thread_from_starting(
    rig: RigFactory,
) -> None:
    async with rig(runtime=HeldRuntime()) as r:
        ts = (await r.say("fix the login page")).event["ts"]
        await r.held.wait_started(1, WAIT)
        waiting = (await r.say("and the logout page", thread_ts=ts)).event["ts"]
        await r.slack.wait_for(lambda: "Got it." in r.bot_text("D1", ts) or None, WAIT)

        await r.slack.agent.press_stop("U1", "D1", ts)
        assert await r.final_reaction("D1", ts) == "x"
        assert await r.final_reaction("D1", waiting) == "x"
        shown = r.bot_text("D1", ts)
        started = len(r.held.started)

    assert "Not started: <@U1> pressed Stop before this message's turn." in shown
    assert started == 1  # the follow-up's agent never started


@pytest.mark.parametrize("mode", ["http", "socket"])
async def test_stop_by_someone_without_rights_is_refused_and_the_agent_keeps_running(
    rig: RigFactory, mode: Mode
) -> None:
    async with rig(runtime=HeldRuntime(), slack_settings=ADMINS, mode=mode) as r:
        ts = (await r.say("<@UBOT> fix the login page", channel="C1")).event["ts"]
        await r.held.wait_started(1, WAIT)
        await status_becomes(r, "C1", ts, "processing")

        pressed = await r.slack.agent.press_stop("U2", "C1", ts)
        [refusal] = await r.slack.wait_for(lambda: r.slack.ephemeral("U2"), WAIT)
        still = r.orchestrator.agents()
        status = r.slack.agent.session_status("C1", ts)
        await r.slack.deliver_event(pressed.event, retry_of=pressed)  # delivered again

        await r.slack.agent.press_stop("UADMIN", "C1", ts)  # an admin may
        assert await r.final_reaction("C1", ts) == "x"
        told = r.slack.ephemeral("U2")

    assert (
        "You can't stop this thread's agents: only the person who asked for it (<@U1>)"
        in (refusal["text"])
    )
    assert len(still) == 1 and status == "processing"
    assert len(told) == 1  # a delivery Slack repeats is handled once
    assert "was stopped by <@UADMIN>" in r.bot_text("C1", ts)


async def test_a_deleted_tasks_session_is_closed_when_stop_finds_the_task_gone(
    rig: RigFactory,
) -> None:
    async with rig(runtime=HeldRuntime()) as r:
        r.held.release()
        ts = (await r.say("fix the login page")).event["ts"]
        assert await r.final_reaction("D1", ts) == "white_check_mark"
        await status_becomes(r, "D1", ts, "active")
        await r.orchestrator.tasks.delete_task(
            (await latest_task(r.orchestrator)).slug
        )  # harness rm

        await r.slack.agent.press_stop("U1", "D1", ts)
        await status_becomes(r, "D1", ts, "closed")
        [answer] = r.slack.ephemeral("U1")

    assert answer["text"] == NO_TASK


# ------------------------------------------------------------------ where Slack says no


async def test_an_app_not_declared_an_agent_keeps_the_assistant_status_and_says_so_once(
    rig: RigFactory, caplog: pytest.LogCaptureFixture
) -> None:
    async with rig(runtime=HeldRuntime()) as r:
        r.slack.agent.declare_agent("not_allowed")
        r.held.release()
        first = (await r.say("fix the login page")).event["ts"]
        second = (await r.say("fix the signup page", user="U2", channel="D2")).event["ts"]
        assert await r.final_reaction("D1", first) == "white_check_mark"
        assert await r.final_reaction("D2", second) == "white_check_mark"

    assert r.slack.agent.statuses("D1", first)[0] == "is reading your message…"
    assert r.slack.agent.statuses("D2", second)  # the status line goes on
    assert r.slack.agent.session("D1", first) is None
    [line] = hint_lines(caplog, ENABLE_HINT)
    assert "not_allowed" in line.getMessage() and "agent_view" in line.getMessage()


async def test_an_app_not_subscribed_to_stop_is_warned_once_and_still_has_sessions(
    rig: RigFactory, caplog: pytest.LogCaptureFixture
) -> None:
    async with rig(runtime=HeldRuntime()) as r:
        r.slack.agent.subscribe_to_stop(False)
        r.held.release()
        first = (await r.say("fix the login page")).event["ts"]
        second = (await r.say("fix the signup page", user="U2", channel="D2")).event["ts"]
        assert await r.final_reaction("D1", first) == "white_check_mark"
        assert await r.final_reaction("D2", second) == "white_check_mark"
        await status_becomes(r, "D2", second, "active")

    [line] = hint_lines(caplog, SUBSCRIBE_HINT)
    assert "agent_session_stopped" in line.getMessage()
    assert r.slack.agent.session_status("D1", first) == "active"


# ------------------------------------------------------------------ statuses over a run


@pytest.mark.slow
async def test_a_session_is_processing_then_suspended_on_a_question_then_active(
    rig: RigFactory,
) -> None:
    async with rig(asking("Which database?"), options=STREAMING) as r:
        ts = (await r.say("<@UBOT> set up the storage", channel="C1")).event["ts"]

        def asked() -> list[dict[str, Any]] | None:
            found = [m for m in r.bot_messages("C1", ts) if "asks:" in message_text(m)]
            return found or None

        await r.slack.wait_for(asked, WAIT)
        await status_becomes(r, "C1", ts, "suspended")
        await r.say("Postgres", channel="C1", thread_ts=ts)
        assert await r.final_reaction("C1", ts) == "white_check_mark"
        await status_becomes(r, "C1", ts, "active")
        session = r.slack.agent.session("C1", ts)
        [stream] = r.slack.agent.streams("C1", ts)

    assert session is not None
    assert session.history == ["processing", "suspended", "processing", "active"]
    assert session.title == "set up the storage"
    assert stream.session_status == "active"  # the reply ends with the session's status


async def test_a_session_left_processing_by_a_crashed_bot_gets_its_status_at_the_next_start(
    rig: RigFactory,
) -> None:
    async with rig(runtime=HeldRuntime()) as r:
        r.held.release()
        ts = (await r.say("fix the login page")).event["ts"]
        assert await r.final_reaction("D1", ts) == "white_check_mark"
        await status_becomes(r, "D1", ts, "active")
        [record] = (await latest_task(r.orchestrator)).dispatches
        # As a bot killed while its agent ran leaves it in Slack:
        await r.bot.client.agents_sessions_setStatus(
            channel_id="D1", thread_ts=ts, status="processing"
        )
        interrupted = [((await latest_task(r.orchestrator)).slug, record)]
        assert r.bot.sessions is not None

        await r.bot.sessions.after_restart(interrupted)

        await status_becomes(r, "D1", ts, "active")


async def a_thread_a_stopped_replica_left(r: Rig) -> str:
    """A finished thread's ts, whose task also holds agent ``a0e15e`` as another bot process
    that stopped mid-run leaves it, not yet taken over."""
    r.held.release()
    ts: str = (await r.say("fix the login page")).event["ts"]
    assert await r.final_reaction("D1", ts) == "white_check_mark"
    await status_becomes(r, "D1", ts, "active")
    store = FileTaskStore(r.orchestrator.config.tasks_dir)
    try:
        slug = (await latest_task(r.orchestrator)).slug
        await store.save_dispatch(slug, make_record("a0e15e", run_id="0123456789abcdef"))
    finally:
        await store.close()
    return ts


async def test_stop_on_an_agent_a_stopped_replica_left_says_to_press_again_not_nothing_runs(
    rig: RigFactory,
) -> None:
    async with rig(runtime=HeldRuntime()) as r:
        ts = await a_thread_a_stopped_replica_left(r)

        await r.slack.agent.press_stop("U1", "D1", ts)
        [answer] = await r.slack.wait_for(lambda: r.slack.ephemeral("U1"), WAIT)

        assert answer["text"] == HELD_BY_A_STOPPED_REPLICA


async def test_kill_of_an_agent_another_replica_holds_says_to_try_again_not_that_none_runs(
    rig: RigFactory,
) -> None:
    async with rig(runtime=HeldRuntime()) as r:
        await a_thread_a_stopped_replica_left(r)

        elsewhere = await r.slack.slash_command("/harness", "kill a0e15e", "U1", "D1")
        unknown = await r.slack.slash_command("/harness", "kill a000000", "U1", "D1")

        assert elsewhere.response_payload["text"] == HELD_ELSEWHERE.format(agent="a0e15e")
        assert unknown.response_payload["text"].startswith("No running or queued agent `a000000`")
