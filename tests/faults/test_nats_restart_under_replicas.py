"""nats-server (JetStream with its store folder, so the streams survive) SIGKILLed and
started again under two real ``harness bot`` replicas in HTTP mode (``runtime`` and
``store`` on it, agents on a real ``harness worker``): both say they are not ready while it
is away, both turn ready again once it is back, and a DM sent to either afterwards is
answered once."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

import aiohttp
import pytest

from tests.bot.clocked_bots import ClockedBot, until
from tests.bot.conftest import WAIT, finish_with_prompt
from tests.faults.nats_bot import HeldUntilReleased, NatsBot, nats_bot, replicas

pytestmark = [pytest.mark.anyio, pytest.mark.slow, pytest.mark.nats, pytest.mark.waits]


async def readyz(bot: ClockedBot) -> tuple[int, str]:
    base = bot.url.removesuffix("/slack/events")
    async with aiohttp.ClientSession() as session, session.get(f"{base}/readyz") as response:
        return response.status, await response.text()


async def until_ready(bot: ClockedBot, ready: bool) -> str:
    """Polls the replica's /readyz (bounded) until it is ready (200) or not (503); what it
    said then."""
    said = ""
    try:
        async with asyncio.timeout(WAIT):
            while True:
                status, said = await readyz(bot)
                if (status == 200) == ready:
                    return said
                await asyncio.sleep(0.1)
    except TimeoutError:
        log = "".join(bot.lines[-30:])
        state = "ready" if ready else "unready"
        raise AssertionError(f"/readyz never {state}: {said}\n{log}") from None


async def answered(c: NatsBot, bot: ClockedBot, text: str) -> str:
    """Sends a DM to ``bot``; its ts, once the thread has the agent's answer."""
    c.slack.bot_url = bot.url
    ts = str((await c.slack.user_message("U1", "D1", text)).event["ts"])
    await c.until_said("D1", ts, f"Done: {text}")
    return ts


async def test_nats_killed_and_restarted_under_two_replicas_then_both_are_ready_and_answer_once(
    project_dir: Path, tmp_path: Path
) -> None:
    async with (
        nats_bot(project_dir, tmp_path, finish_with_prompt, lost_after=30) as c,
        replicas(c) as r,
    ):
        a, b = r.bots
        for bot in (a, b):
            await until_ready(bot, True)
        before = await answered(c, a, "fix the login bug")

        await c.nats.kill()
        for bot in (a, b):
            assert "NATS" in await until_ready(bot, False)
        await c.nats.start()  # same port, same store folder
        for bot in (a, b):
            await until_ready(bot, True)

        on_b = await answered(c, b, "update the docs")
        on_a = await answered(c, a, "tidy the logs")
        assert await a.stop() == 0 and await b.stop() == 0
    for ts, text in ((before, "fix the login bug"), (on_b, "update the docs"),
                     (on_a, "tidy the logs")):  # fmt: skip
        assert len(c.said("D1", ts, f"Done: {text}")) == 1
    ran = sorted(m.first_user_text.strip().splitlines()[-1] for m in c.model.main_requests)
    assert ran == ["fix the login bug", "tidy the logs", "update the docs"]


def beats_missed(bot: ClockedBot, since: int) -> Callable[[], bool]:
    """Whether the replica has failed to store 3 of its run's heartbeats after log line
    ``since``."""
    return lambda: sum("heartbeat not stored" in line for line in bot.lines[since:]) >= 3


def back(bot: ClockedBot, since: int) -> bool:
    """Whether the replica looked at the runs since NATS came back (after log line ``since``)."""
    return any("NATS is back" in line for line in bot.lines[since:])


async def test_an_agent_at_work_through_a_long_nats_outage_ends_in_its_thread_once(
    project_dir: Path, tmp_path: Path
) -> None:
    held = HeldUntilReleased()
    async with nats_bot(project_dir, tmp_path, held, lost_after=60) as c, replicas(c) as r:
        a, b = r.bots
        for bot in (a, b):
            await until_ready(bot, True)
        c.slack.bot_url = a.url
        ts = str((await c.slack.user_message("U1", "D1", "fix the login bug")).event["ts"])
        await held.until_started(1, WAIT)

        marks = [len(a.lines), len(b.lines)]
        await c.nats.kill()
        # Away for longer than a run's heartbeat lasts (3 beats): when it is back,
        # neither replica's run is marked live until it beats again.
        for bot, mark in zip((a, b), marks, strict=True):
            await until(beats_missed(bot, mark), "3 heartbeats not stored", bot)
        await c.nats.start()
        for bot in (a, b):
            await until_ready(bot, True)
        # The replica taking over looks for stopped runs while the agent still works.
        await until(lambda: back(a, marks[0]) or back(b, marks[1]), "NATS is back", a)
        after = await answered_once_released(c, held, b, ts)
        assert await a.stop() == 0 and await b.stop() == 0
    assert len(c.said("D1", ts, "Done: fix the login bug")) == 1
    assert len(c.said("D1", after, "Done: update the docs")) == 1
    assert not any("taking over from a stopped replica" in line for line in a.lines + b.lines)
    assert len(held.sessions) == 2


async def answered_once_released(
    c: NatsBot, held: HeldUntilReleased, bot: ClockedBot, ts: str
) -> str:
    """Sends a DM to ``bot`` once the held agent is released and has answered ``ts``."""
    held.release.set()
    await c.until_said("D1", ts, "Done: fix the login bug")
    return await answered(c, bot, "update the docs")
