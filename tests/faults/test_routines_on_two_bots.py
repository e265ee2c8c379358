"""Two real ``harness bot`` processes with one config on one nats-server (``runtime: nats``,
agents on a ``harness worker``), on the same clock a test sets: a schedule's slot fires once
(one thread, one task) and a GitHub event delivered to each process runs once. Each process's
metrics show that it looked at the firing and found it claimed by the other."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import re
from datetime import timedelta
from pathlib import Path

import aiohttp
import pytest

from harness.testing.clock_file import set_time
from tests.bot.clocked_bots import ClockedBot, slot, this_minute, ticked
from tests.bot.conftest import WAIT, finish_with_prompt, message_text
from tests.bot.routine_bots import openings, signed
from tests.bot.test_routines_across_processes import routine_tasks
from tests.faults.nats_bot import NatsBot, Replicas, nats_bot, replicas
from tests.routine_support import EVERY_MINUTE, ON_PUSH, with_routines

pytestmark = [pytest.mark.anyio, pytest.mark.slow, pytest.mark.nats, pytest.mark.waits]

HOOK_SECRET = "two-bots-hook-secret"


async def metric(bot: ClockedBot, name: str, labels: str) -> float:
    base = bot.url.removesuffix("/slack/events")
    async with aiohttp.ClientSession() as session, session.get(f"{base}/metrics") as response:
        text = await response.text()
    found = re.search(rf"^{re.escape(name)}\{{{re.escape(labels)}\}} (\S+)$", text, re.M)
    return float(found.group(1)) if found else 0.0


async def both(bots: list[ClockedBot], name: str, labels: str) -> list[float]:
    """The metric of each process, in order, once one has 1 (within a bound)."""
    async with asyncio.timeout(WAIT):
        while True:
            seen = sorted([await metric(bot, name, labels) for bot in bots])
            if seen[-1] >= 1:
                return seen
            await asyncio.sleep(0.1)


async def test_two_bot_processes_on_one_nats_fire_a_slot_and_a_redelivered_event_once(
    project_dir: Path, tmp_path: Path
) -> None:
    clock, minute = tmp_path / "clock", this_minute()
    due, due_text = slot(minute, 1)
    set_time(clock, minute + timedelta(seconds=30))
    async with (
        nats_bot(project_dir, tmp_path, finish_with_prompt, lost_after=10) as c,
        scheduling(c, clock, store=None) as started,
    ):
        one, two = bots = list(started.bots)
        set_time(clock, due + timedelta(seconds=1))
        (opening,) = await c.slack.wait_for(lambda: openings(c.slack, "every-minute") or None, WAIT)
        assert f"at {due_text}" in opening["text"]
        fired = 'routine="every-minute",trigger="schedule"'
        assert await both(bots, "harness_routine_firings_total", fired) == [0.0, 1.0]

        body, headers = signed(HOOK_SECRET, "push", "delivery-1", {
            "ref": "refs/heads/main", "repository": {"full_name": "acme/web"},
        })  # fmt: skip
        for bot in bots:  # GitHub re-delivers; a load balancer sends it to each
            base = bot.url.removesuffix("/slack/events")
            async with (
                aiohttp.ClientSession() as session,
                session.post(f"{base}/github/webhook", data=body, headers=headers) as r,
            ):
                assert r.status == 202, await r.text()
        pushed = 'routine="on-push",trigger="github"'
        assert await both(bots, "harness_routine_firings_total", pushed) == [0.0, 1.0]
        duplicate = 'reason="duplicate",routine="on-push"'  # the other one's answer
        assert await both(bots, "harness_routine_skips_total", duplicate) == [0.0, 1.0]
        (push,) = await c.slack.wait_for(lambda: openings(c.slack, "on-push") or None)
        for thread in (opening, push):
            await c.slack.wait_for(functools.partial(done, c, thread), WAIT)
        await ticked(c.config, one)  # the slot looked at again: nothing new
        assert await one.stop() == 0 and await two.stop() == 0
    tasks = routine_tasks(c.config)
    assert len(tasks) == 1 and len(openings(c.slack, "every-minute")) == 1
    assert len(openings(c.slack, "on-push")) == 1


def scheduling(
    c: NatsBot, clock: Path, store: str | None
) -> contextlib.AbstractAsyncContextManager[Replicas]:
    """Two bots on ``clock``'s time with the routines (every minute, on a push) and the
    webhook's secret."""
    with_routines(c.config, EVERY_MINUTE, ON_PUSH)
    env = {"GITHUB_WEBHOOK_SECRET": HOOK_SECRET}
    return replicas(c, store=store, env=env, clock=clock)


def done(c: object, opening: dict[str, object]) -> bool | None:
    thread = c.slack.thread("C0ROUTINE", str(opening["ts"]))  # type: ignore[attr-defined]
    return any("Done: " in message_text(m) for m in thread) or None


async def test_one_of_two_bots_schedules_and_the_other_takes_over_once_it_is_killed(
    project_dir: Path, tmp_path: Path
) -> None:
    clock, minute = tmp_path / "clock", this_minute()
    first, first_text = slot(minute, 1)
    second, second_text = slot(minute, 2)
    set_time(clock, minute + timedelta(seconds=30))
    async with (
        nats_bot(project_dir, tmp_path, finish_with_prompt, lost_after=10) as c,
        scheduling(c, clock, store="scheduler") as started,  # the store on NATS too
    ):
        one, two = started.bots
        lease = 'lease="routines"'
        assert await both([one, two], "harness_leases_held", lease) == [0.0, 1.0]
        holder, other = (
            (one, two) if await metric(one, "harness_leases_held", lease) else (two, one)
        )
        set_time(clock, first + timedelta(seconds=1))
        await c.slack.wait_for(lambda: openings(c.slack, "every-minute") or None, WAIT)
        fired = 'routine="every-minute",trigger="schedule"'
        assert await both([holder], "harness_routine_firings_total", fired) == [1.0]
        assert await metric(other, "harness_routine_firings_total", fired) == 0.0
        # Its agent's result is in first: the shared clock jumps a minute ahead below, and a
        # run still at work then would be past its liveness bound (10 s) and so interrupted.
        (opening,) = openings(c.slack, "every-minute")
        await c.slack.wait_for(functools.partial(done, c, opening), WAIT)

        await holder.kill()  # the scheduling replica dies: the other takes it up
        # once its lease has run out on the clock the replicas share (6 s).
        set_time(clock, first + timedelta(seconds=10))
        await both([other], "harness_leases_held", lease)
        set_time(clock, second + timedelta(seconds=1))
        await c.slack.wait_for(lambda: len(openings(c.slack, "every-minute")) == 2 or None, WAIT)
        assert await both([other], "harness_routine_firings_total", fired) == [1.0]
        for opening in openings(c.slack, "every-minute"):
            await c.slack.wait_for(functools.partial(done, c, opening), WAIT)
        await ticked(c.config, other)  # it answers the run requests now, too
        assert await other.stop() == 0
    texts = [str(opening["text"]) for opening in openings(c.slack, "every-minute")]
    assert [f"at {first_text}" in texts[0], f"at {second_text}" in texts[1]] == [True, True]
