"""A Slack thread whose agent runs on a ``harness worker``: the real Bolt app on the emulator,
a real nats-server with JetStream, one worker process (one agent a test) running the real
Claude Code CLI against the scripted model. The thread works as with a local agent: the
agent's question and its command approval are answered in the thread, ``/harness list``
names the worker, and ``/harness kill`` stops the CLI on the worker."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from bot.testing.slack_emulator import SlackEmulator
from harness.runtime.nats_hosting import NatsHosting
from harness.runtime.nats_link import NatsSettings
from harness.testing.nats_server import NatsServer
from harness.testing.processes import claude_children
from harness.testing.scripted_model import ModelRequest, Script, ScriptedModel, Turn
from harness.testing.workers import start_workers, stop_workers, worker_env
from tests.bot.conftest import WAIT, Rig, RigFactory, message_text

pytestmark = [pytest.mark.anyio, pytest.mark.slow, pytest.mark.nats]

ASK = "mcp__harness__ask_human"


@dataclass
class Remote:
    rig: Rig
    model: ScriptedModel
    workers: dict[str, asyncio.subprocess.Process]


RemoteRig = Callable[[Script], contextlib.AbstractAsyncContextManager[Remote]]


@pytest.fixture
def remote_rig(rig: RigFactory, tmp_path: Path) -> RemoteRig:
    """``async with remote_rig(script) as remote:`` the bot, its agents on a worker."""

    @contextlib.asynccontextmanager
    async def start(script: Script) -> AsyncIterator[Remote]:
        async with NatsServer(tmp_path / "nats") as nats, ScriptedModel(script) as model:
            env = worker_env(model.env())
            workers = await start_workers(("worker-a",), nats.url, env, tmp_path)
            try:
                runtime = NatsHosting(NatsSettings(nats.url), lost_after=3.0)
                async with rig(runtime=runtime) as r:
                    yield Remote(r, model, workers)
            finally:
                await stop_workers(workers.values())

    return start


def in_thread(r: Rig, ts: str, needle: str) -> Callable[[], list[dict[str, Any]] | None]:
    def found() -> list[dict[str, Any]] | None:
        return [m for m in r.bot_messages("D1", ts) if needle in message_text(m)] or None

    return found


def listing(slack: SlackEmulator, user: str) -> list[dict[str, Any]] | None:
    return [e for e in slack.ephemeral(user) if "*Agents*" in str(e.get("text"))] or None


def asks_then_runs_a_command(request: ModelRequest) -> Turn:
    """Asks which colour, runs a command its role must have approved, then reports both."""
    done = request.all_tool_results
    if not done:
        return Turn.call(ASK, question="Which colour?")
    if len(done) == 1:
        return Turn.call("Bash", command="git push -h")
    colour = (done[0].json() or {}).get("answer")
    return Turn.finish(f"painted it {colour}", [f"ran: {done[1].text.strip()}"])


async def test_a_remote_agents_question_and_approval_are_answered_in_the_thread(
    remote_rig: RemoteRig,
) -> None:
    async with remote_rig(asks_then_runs_a_command) as remote:
        r = remote.rig
        ts = (await r.say("paint the page")).event["ts"]
        await r.slack.wait_for(in_thread(r, ts, "Which colour?"), WAIT)
        await r.slack.slash_command("/harness", "list", "U1", "D1")
        [agents] = await r.slack.wait_for(lambda: listing(r.slack, "U1"), WAIT)
        await r.say("blue", thread_ts=ts)

        [approval] = await r.slack.wait_for(in_thread(r, ts, "asks to run"), WAIT)
        assert "git push -h" in message_text(approval)
        [actions] = [b for b in approval["blocks"] if b["type"] == "actions"]
        allow = actions["elements"][0]
        await r.slack.block_action(
            "U1", "D1", approval["ts"], allow["action_id"], allow["value"], thread_ts=ts
        )
        assert await r.final_reaction("D1", ts) == "white_check_mark"
        shown = r.bot_text("D1", ts)

    assert "on worker `worker-" in agents["text"]
    assert "painted it blue" in shown
    assert "usage: git push" in shown


async def test_harness_kill_stops_a_remote_agents_cli_on_its_worker(remote_rig: RemoteRig) -> None:
    async with remote_rig(lambda request: Turn(stall_seconds=120)) as remote:
        r = remote.rig
        ts = (await r.say("a very slow job")).event["ts"]
        await remote.model.wait_for_request(timeout=WAIT)  # the agent is at work
        [agent] = await r.slack.wait_for(
            lambda: [a for a in r.orchestrator.agents() if a.worker] or None, WAIT
        )
        worker = remote.workers[str(agent.worker)]
        assert claude_children(worker.pid)
        killed = await r.slack.slash_command("/harness", f"kill {agent.agent_id}", "U1", "D1")
        assert killed.response_payload["text"].startswith(f"Stopping developer `{agent.agent_id}`")
        assert await r.final_reaction("D1", ts) == "x"
        shown = r.bot_text("D1", ts)
        gone = not claude_children(worker.pid)

    assert "⏹️ *developer* was stopped by <@U1>" in shown
    assert gone  # the worker's CLI ended before the thread was told


async def test_files_in_a_request_reach_an_agent_on_a_worker(remote_rig: RemoteRig) -> None:
    png = bytes.fromhex(
        "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
        "1f15c4890000000d49444154789c63fccf50000000030001018f3a8f9d0000000049454e44ae426082"
    )
    log = b"worker log: disk full\n"

    def reads_the_log(request: ModelRequest) -> Turn:
        done = request.all_tool_results
        if not done:
            cwd = request.system_text.split("Primary working directory: ")[1].split()[0]
            return Turn.call("Read", file_path=f"{cwd}/.attachments/w.log")
        return Turn.finish("read it", [done[0].text])

    async with remote_rig(reads_the_log) as remote:
        r = remote.rig
        files = [r.slack.user_file("U1", "w.log", log), r.slack.user_file("U1", "w.png", png)]
        ts = (await r.slack.user_message("U1", "D1", "what broke?", files=files)).event["ts"]
        assert await r.final_reaction("D1", ts, WAIT) == "white_check_mark"
        assert "worker log: disk full" in r.bot_text("D1", ts)
        first = remote.model.main_requests[0].messages[0]["content"]
        images = [b for b in first if isinstance(b, dict) and b.get("type") == "image"]
        assert [i["source"]["media_type"] for i in images] == ["image/png"]

        # Files travel in the run request: past the NATS server's max_payload, it says so.
        big = [r.slack.user_file("U1", "big.log", b"x" * 1_500_000)]
        ts = (await r.slack.user_message("U1", "D1", "and this?", files=big)).event["ts"]
        assert await r.final_reaction("D1", ts, WAIT) == "x"
        assert "over the NATS server's max_payload" in r.bot_text("D1", ts)
