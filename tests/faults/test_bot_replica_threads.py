"""Two real ``harness bot`` replicas on one config (``runtime`` and ``store`` on one
nats-server, agents on a real ``harness worker``): what is said or pressed in a thread
reaches the replica that holds the thread's agent, whichever replica Slack sends it to. An
agent's question is answered and its approval given through the other replica; a follow-up
sent to the other replica waits behind the running agent, as it would on one process, and
a Stop pressed or a ``/harness kill`` typed there stops the agent."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from harness.testing.scripted_model import ModelRequest, Turn
from tests.bot.clocked_bots import ClockedBot
from tests.bot.conftest import FINAL, WAIT, message_text, session_of
from tests.bot.test_remote_agents_in_slack import asks_then_runs_a_command
from tests.faults.nats_bot import HeldUntilReleased, Mode, NatsBot, nats_bot, replicas

pytestmark = [pytest.mark.anyio, pytest.mark.slow, pytest.mark.nats, pytest.mark.waits]


class HeldAndRead(HeldUntilReleased):
    """Holds every agent's turn, and keeps what each agent was asked."""

    def __init__(self) -> None:
        super().__init__()
        self.asked: list[str] = []

    async def __call__(self, request: ModelRequest) -> Turn:
        if session_of(request) not in self.sessions:
            self.asked.append(request.first_user_text)
        return await super().__call__(request)


def bot_message(c: NatsBot, ts: str, needle: str) -> dict[str, Any] | None:
    found = [m for m in c.slack.thread("D1", ts) if m.get("bot_id") and needle in message_text(m)]
    return found[0] if found else None


def handed_on(bot: ClockedBot) -> int:
    return sum("which holds its agent" in line for line in bot.lines)


async def final_reaction(c: NatsBot, ts: str) -> str:
    return await c.slack.wait_for(
        lambda: next(iter(c.slack.reactions("D1", ts) & set(FINAL)), None), WAIT
    )


async def test_a_question_and_an_approval_are_answered_through_the_other_replica(
    project_dir: Path, tmp_path: Path
) -> None:
    async with (
        nats_bot(project_dir, tmp_path, asks_then_runs_a_command, lost_after=30) as c,
        replicas(c) as r,
    ):
        a, b = r.bots
        c.slack.bot_url = a.url
        ts = (await c.slack.user_message("U1", "D1", "paint the page")).event["ts"]
        await c.slack.wait_for(lambda: bot_message(c, ts, "Which colour?"), WAIT)

        c.slack.bot_url = b.url  # the load balancer picks B from now on
        await c.slack.user_message("U1", "D1", "blue", thread_ts=ts)
        approval = await c.slack.wait_for(lambda: bot_message(c, ts, "asks to run"), WAIT)
        assert "git push -h" in message_text(approval)
        [actions] = [b for b in approval["blocks"] if b["type"] == "actions"]
        allow = actions["elements"][0]
        await c.slack.block_action(
            "U1", "D1", approval["ts"], allow["action_id"], allow["value"], thread_ts=ts
        )
        assert await final_reaction(c, ts) == "white_check_mark"
        assert handed_on(b) == 2  # the answer and the click, each handed to A
        assert await a.stop() == 0 and await b.stop() == 0
    shown = "\n".join(message_text(m) for m in c.slack.thread("D1", ts) if m.get("bot_id"))
    assert "painted it blue" in shown and "usage: git push" in shown
    assert len(c.said("D1", ts, "painted it blue")) == 1


async def test_a_follow_up_waits_behind_the_agent_and_a_stop_stops_one_through_the_other_replica(
    project_dir: Path, tmp_path: Path
) -> None:
    held = HeldAndRead()
    async with nats_bot(project_dir, tmp_path, held, lost_after=30) as c, replicas(c) as r:
        a, b = r.bots
        c.slack.bot_url = a.url
        ts = (await c.slack.user_message("U1", "D1", "fix the login bug")).event["ts"]
        other = (await c.slack.user_message("U1", "D1", "tidy the logs")).event["ts"]
        await held.until_started(2, WAIT)

        c.slack.bot_url = b.url
        await c.slack.user_message("U1", "D1", "also update the docs", thread_ts=ts)
        await c.until_said("D1", ts, "I'll pick your message up when it finishes")
        await c.slack.agent.press_stop("U1", "D1", other)
        await c.until_said("D1", other, "was stopped by <@U1>")
        assert len(held.sessions) == 2  # the follow-up waits for its thread's agent
        held.release.set()
        await c.until_said("D1", ts, "Done: also update the docs")
        assert handed_on(b) == 2  # the follow-up and the Stop, each handed to A
        assert await a.stop() == 0 and await b.stop() == 0
    assert len(held.sessions) == 3  # the follow-up ran once, after its thread's agent
    # with the thread's context: what its first agent reported
    assert "Done: fix the login bug" in held.asked[2]
    assert len(c.said("D1", ts, "Done: fix the login bug")) == 1
    assert len(c.said("D1", ts, "Done: also update the docs")) == 1
    assert c.said("D1", other, "Done: tidy the logs") == []
    assert len(c.said("D1", other, "was stopped by <@U1>")) == 1


async def test_socket_mode_replicas_answer_each_dm_once_and_hand_a_thread_to_its_holder(
    project_dir: Path, tmp_path: Path
) -> None:
    held = HeldUntilReleased()
    async with (
        nats_bot(project_dir, tmp_path, held, lost_after=30) as c,
        replicas(c, mode="socket") as r,
    ):
        a, b = r.bots
        assert c.slack.server.socket_connections == 2  # one connection each
        c.slack.server.socket_choice = 0  # Slack hands this one to A's connection
        ts = (await c.slack.user_message("U1", "D1", "fix the login bug")).event["ts"]
        await held.until_started(1, WAIT)

        c.slack.server.socket_choice = 1  # and these to B's
        await c.slack.user_message("U1", "D1", "also update the docs", thread_ts=ts)
        await c.until_said("D1", ts, "I'll pick your message up when it finishes")
        other = (await c.slack.user_message("U1", "D1", "tidy the logs")).event["ts"]
        await held.until_started(2, WAIT)
        held.release.set()
        await c.until_said("D1", ts, "Done: also update the docs")
        await c.until_said("D1", other, "Done: tidy the logs")
        assert (handed_on(a), handed_on(b)) == (0, 1)
        assert await b.stop() == 0
        assert await a.stop() == 0
    assert len(held.sessions) == 3
    for thread, said in ((ts, "Done: fix the login bug"), (ts, "Done: also update the docs"),
                         (other, "Done: tidy the logs")):  # fmt: skip
        assert len(c.said("D1", thread, said)) == 1


def agent_of(c: NatsBot, ts: str) -> str | None:
    """The id of the agent the thread's messages name."""
    for m in c.slack.thread("D1", ts):
        found = re.search(r"agent `(a[0-9a-f]+)`", message_text(m)) if m.get("bot_id") else None
        if found:
            return found.group(1)
    return None


@pytest.mark.parametrize("mode", ["http", "socket"])
async def test_a_kill_command_sent_to_the_other_replica_stops_the_agent_and_is_answered(
    project_dir: Path, tmp_path: Path, mode: Mode
) -> None:
    held = HeldUntilReleased()
    async with (
        nats_bot(project_dir, tmp_path, held, lost_after=30) as c,
        replicas(c, mode=mode) as r,
    ):
        a, b = r.bots
        c.slack.bot_url, c.slack.server.socket_choice = a.url, 0  # A gets the DM
        ts = (await c.slack.user_message("U1", "D1", "fix the login bug")).event["ts"]
        await held.until_started(1, WAIT)
        agent = await c.slack.wait_for(lambda: agent_of(c, ts), WAIT)

        c.slack.bot_url, c.slack.server.socket_choice = b.url, 1  # B gets the command
        await c.slack.slash_command("/harness", f"kill {agent}", "U1", "D1")
        await c.until_said("D1", ts, "was stopped by <@U1>")
        [answer] = await c.slack.wait_for(lambda: c.slack.ephemeral("U1") or None, WAIT)
        assert f"Stopping developer `{agent}`" in answer["text"]
        assert (handed_on(a), handed_on(b)) == (0, 1)
        assert await a.stop() == 0 and await b.stop() == 0
    assert len(c.said("D1", ts, "was stopped by <@U1>")) == 1
    assert c.said("D1", ts, "Done: fix the login bug") == []
