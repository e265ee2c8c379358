"""Two real ``harness bot`` replicas on one config (``runtime`` and ``store`` on one
nats-server, agents on a real ``harness worker``), events sent to either: the replica that
took a DM is SIGKILLed while its agent works; the other follows that agent and posts its
result in the thread once, a follow-up sent to it meanwhile runs once in the thread's task,
Slack's retry of the first event is not run again, and ``harness tasks --json`` from
another process lists the task."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

import pytest

from harness.testing import spawn
from tests.bot.clocked_bots import until
from tests.bot.conftest import WAIT
from tests.faults.nats_bot import HeldUntilReleased, nats_bot, replicas

pytestmark = [pytest.mark.anyio, pytest.mark.slow, pytest.mark.nats, pytest.mark.waits]


async def test_a_killed_replica_s_agent_ends_in_its_thread_posted_by_the_other_once(
    project_dir: Path, tmp_path: Path
) -> None:
    held = HeldUntilReleased()
    async with nats_bot(project_dir, tmp_path, held, lost_after=30) as c, replicas(c) as r:
        a, b = r.bots
        c.slack.bot_url = a.url
        sent = await c.slack.user_message("U1", "D1", "fix the login bug")
        ts = sent.event["ts"]
        await until(lambda: len(held.sessions) == 1, "A's agent starts", a)
        await a.kill()

        c.slack.bot_url = b.url
        await c.slack.deliver_event(sent.event, retry_of=sent)  # Slack's retry, to B
        await c.slack.user_message("U1", "D1", "also update the docs", thread_ts=ts)
        await until(lambda: len(held.sessions) == 2, "the follow-up starts on B", b)
        await until(
            lambda: any("taking over from a stopped replica" in line for line in b.lines),
            "B follows A's agent",
            b,
        )
        held.release.set()

        results = await c.until_said("D1", ts, "Done: fix the login bug")
        await c.until_said("D1", ts, "Done: also update the docs")
        assert await b.stop() == 0
        assert len(results) == 1 and len(c.said("D1", ts, "Done: fix the login bug")) == 1
        assert len(held.sessions) == 2  # the retry ran nothing

        listed = await spawn.create_subprocess_exec(
            sys.executable, "-m", "harness", "tasks", "--json", "--config", str(c.config),
            env=c.env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
        out, err = await asyncio.wait_for(listed.communicate(), WAIT)
        assert listed.returncode == 0, err.decode()
        # One task: the follow-up ran in the thread's task, after the first agent.
        [task] = json.loads(out)["tasks"]
        assert (task["dispatchCount"], task["thread"]) == (2, {"channel": "D1", "threadTs": ts})
