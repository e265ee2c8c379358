"""The bot over Socket Mode: DMs, follow-ups and /harness list | kill."""

from __future__ import annotations

import pytest

from harness.tasks.model import ThreadRef
from harness.testing.held_runtime import HeldRuntime
from tests.bot.conftest import WAIT, RigFactory, finish_with_prompt, message_text

pytestmark = [pytest.mark.anyio, pytest.mark.slow]


async def test_socket_mode_dm_and_follow_up_share_one_task(rig: RigFactory) -> None:
    async with rig(finish_with_prompt, mode="socket") as r:
        assert r.slack.calls("apps.connections.open")[0].ok
        sent = await r.say("fix the login bug")
        assert sent.acked
        ts = sent.event["ts"]
        assert await r.final_reaction("D1", ts) == "white_check_mark"
        reply = await r.say("and add a test", thread_ts=ts)
        assert await r.final_reaction("D1", reply.event["ts"]) == "white_check_mark"

        _, second = r.runs()
        assert "## Task History" in second.first_user_text
        assert "Done: fix the login bug" in second.first_user_text
        task = await r.orchestrator.tasks.find_task(ThreadRef("D1", ts))
        assert task is not None and len(task.dispatches) == 2
        assert r.bot_text("D1", ts).count("*developer* finished") == 2


async def test_socket_mode_harness_list_and_kill(rig: RigFactory) -> None:
    # The agent is held. That a kill ends the agent's real CLI process is proved by
    # test_agent_sessions.py::
    # test_stop_during_a_run_ends_the_agents_process_and_the_session_leaves_processing and by
    # tests/harness/agents/test_runs.py::
    # test_kill_during_a_slow_turn_ends_killed_and_the_child_is_gone; Socket Mode with the real
    # CLI by test_socket_mode_dm_and_follow_up_share_one_task.
    async with rig(runtime=HeldRuntime(), mode="socket") as r:
        slack = r.slack
        sent = await r.say("fix it slowly")
        ts = sent.event["ts"]
        await r.held.wait_started(1, WAIT)
        [agent] = r.orchestrator.agents()

        await slack.slash_command("/harness", "list", "U1", "D1")
        listing = await slack.wait_for(
            lambda: [e for e in slack.ephemeral("U1") if "*Agents*" in e["text"]]
        )
        text = listing[0]["text"]
        assert f"*developer* `{agent.agent_id}`" in text
        assert f"task `{agent.task_slug}`" in text
        assert "git_branch: " in text  # the config's list metadata
        assert " s · " in text

        unknown = await slack.slash_command("/harness", "kill a000000", "U1", "D1")
        assert "No running or queued agent `a000000`" in unknown.response_payload["text"]
        refused = await slack.slash_command("/harness", f"kill {agent.agent_id}", "U2", "D2")
        assert "You can't stop" in refused.response_payload["text"]
        assert r.orchestrator.agents()  # still running

        killed = await slack.slash_command("/harness", f"kill {agent.agent_id}", "U1", "D1")
        assert killed.ack is not None
        assert f"Stopping developer `{agent.agent_id}`" in killed.response_payload["text"]
        assert await r.final_reaction("D1", ts) == "x"
        shown = "\n".join(message_text(m) for m in r.bot_messages("D1", ts))
        assert "⏹️ *developer* was stopped by <@U1>" in shown
        assert f"agent `{agent.agent_id}`" in shown
        assert "*What to do next:*" in shown
        ended = await r.orchestrator.wait(agent.agent_id, timeout=WAIT)  # its run has ended
        assert ended.status == "killed"
        assert (await r.orchestrator.record(agent.agent_id)).status == "killed"
