"""Bot replicas on one NATS store: a delivery is handled once whichever replica gets it, what
one replica owed a thread is delivered by another once its holder is gone, and the
singletons run on one replica at a time."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import re
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import aiohttp
import pytest

from bot.dedupe import Dedupe, event_keys
from bot.replica_jobs import PULL_REQUESTS, TAKE_OVER
from bot.testing.slack_emulator import SlackEmulator
from harness.config.store_schema import StoreSettings
from harness.project import Project, load_project
from harness.tasks.leases import NatsLeases
from harness.tasks.model import ThreadRef
from harness.tasks.nats_ledger import NatsLedger
from harness.testing.clock import FakeClock
from harness.testing.held_runtime import HeldRuntime
from harness.testing.nats_server import NatsServer
from tests.bot.conftest import WAIT, Rig, RigFactory

pytestmark = [pytest.mark.anyio, pytest.mark.nats]

HOUR = 3600.0


@pytest.fixture
async def nats(tmp_path: Path) -> AsyncIterator[NatsServer]:
    async with NatsServer(tmp_path / "nats") as server:
        yield server


@pytest.fixture
def store(nats: NatsServer) -> StoreSettings:
    return StoreSettings(kind="nats", url=nats.url, prefix="replicas")


@pytest.fixture
def project(project_dir: Path, store: StoreSettings) -> Project:
    loaded = load_project(project_dir / "config.yaml")
    return dataclasses.replace(loaded, config=dataclasses.replace(loaded.config, store=store))


@contextlib.asynccontextmanager
async def two_replicas_dedupe(
    store: StoreSettings,
) -> AsyncIterator[tuple[NatsLedger, Dedupe, Dedupe]]:
    """Two replicas' dedupes, each on a connection of its own to the ledger on ``store``,
    loaded; the first one's ledger too."""
    first, second = await NatsLedger.open(store), await NatsLedger.open(store)
    try:
        a, b = Dedupe(first, HOUR), Dedupe(second, HOUR)
        await a.load()
        await b.load()
        yield first, a, b
    finally:
        await first.close()
        await second.close()


async def test_a_key_claimed_by_one_replica_is_a_duplicate_on_the_other(
    store: StoreSettings,
) -> None:
    async with two_replicas_dedupe(store) as (_, a, b):
        event = {"type": "message", "channel": "D1", "user": "U1", "text": "hi", "ts": "1.0"}
        keys = event_keys(event, "Ev1", "UBOT")
        assert keys == ["event:Ev1", "message:D1:1.0"]

        await a.claim(keys)
        assert a.first_time("event:Ev1") and a.first_time("message:D1:1.0")
        await b.claim(keys)  # Slack's retry, to the other replica
        assert not b.first_time("event:Ev1") and not b.first_time("message:D1:1.0")
        # A repeat within one replica is still answered from memory.
        assert not a.first_time("event:Ev1")


async def test_a_retry_that_loses_the_event_leaves_the_message_to_the_replica_claiming_it(
    store: StoreSettings,
) -> None:
    async with two_replicas_dedupe(store) as (first, a, b):
        keys = ["event:Ev2", "message:D1:2.0"]
        # A has claimed the event id and is about to claim the message (a slow replica) when
        # Slack's retry reaches B.
        assert await first.claim("event:Ev2")
        await b.claim(keys)
        await a.claim(keys[1:])

        assert not b.first_time("event:Ev2") and not b.first_time("message:D1:2.0")
        assert a.first_time("message:D1:2.0")  # A runs it: the message is not lost


async def test_a_retry_delivered_to_another_replica_is_not_run_again(
    rig: RigFactory, slack: SlackEmulator
) -> None:
    async with rig(runtime=HeldRuntime()) as a, rig(runtime=HeldRuntime()) as b:
        slack.bot_url = a.server.url
        sent = await a.say("fix the login bug")
        await a.held.wait_started(1, WAIT)

        slack.bot_url = b.server.url
        await slack.deliver_event(sent.event, retry_of=sent)  # Slack's retry, to replica B
        other = await b.say("add a changelog")
        await b.held.wait_started(1, WAIT)
        a.held.release()
        b.held.release()

        assert await a.final_reaction("D1", sent.event["ts"], WAIT) == "white_check_mark"
        assert await b.final_reaction("D1", other.event["ts"], WAIT) == "white_check_mark"
        await b.bot.background.drain(WAIT)
        assert [spec.prompt for spec in b.held.started] == ["add a changelog"]


def _result(thread_ts: str, text: str) -> dict[str, object]:
    """An outbox entry as a replica stores it: one post in the thread."""
    return {"thread": ["D1", thread_ts], "steps": [{"op": "post", "message": text}],
            "key": f"k-{text}"}  # fmt: skip


async def test_what_a_dead_replica_owed_a_thread_is_posted_by_another_once(
    rig: RigFactory, slack: SlackEmulator, store: StoreSettings
) -> None:
    async with rig(runtime=HeldRuntime()) as b:
        slack.delivery = "none"  # a thread replica A answers: stored, not delivered to B
        asked = await slack.user_message("U1", "D1", "fix the login bug")
        ts = asked.event["ts"]
        # Replica A owed the thread its result and took the thread to deliver it, then died:
        # its clock a minute behind, its claim on the thread has run out already.
        behind = FakeClock(datetime.now(UTC) - timedelta(minutes=1))
        dead = await NatsLedger.open(store, behind, holder="replica-a")
        try:
            await dead.owe(f"D1/{ts}", _result(ts, "the login bug is fixed"))
            assert len(await dead.pending()) == 1  # A holds the thread now

            # B owes nothing itself: it still finds A's entry and posts it, once.
            posted = await slack.wait_for(lambda: calls_with(slack, "the login bug is fixed"), WAIT)
            await b.bot.outbox.settled(WAIT)
            assert len(posted) == 1 and calls_with(slack, "the login bug is fixed") == posted
            assert await dead.failed() == []
        finally:
            await dead.close()


async def test_a_replica_whose_thread_was_taken_over_drops_it_without_a_traceback(
    rig: RigFactory, slack: SlackEmulator, store: StoreSettings, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="bot.outbox")
    async with rig(runtime=HeldRuntime()) as b:
        slack.delivery = "none"
        ts = (await slack.user_message("U1", "D1", "fix the login bug")).event["ts"]
        slack.faults.stall("chat.postMessage")
        await b.bot.outbox.owe(ThreadRef("D1", ts), [{"op": "post", "message": "slow result"}])
        await slack.wait_for(lambda: "chat.postMessage" in slack.faults.waiting, WAIT)

        # B hangs on Slack past its claim on the thread: replica C (its clock a minute
        # ahead) takes the thread over.
        ahead = FakeClock(datetime.now(UTC) + timedelta(minutes=1))
        taker = await NatsLedger.open(store, ahead, holder="replica-c")
        try:
            [taken] = await taker.pending()
            assert taken.attempts == 1  # C looks for B's post before it posts again
            slack.faults.unstall()

            # B's post went out; its record of it is refused (the thread is C's to finish),
            # and B goes on delivering other threads at once.
            await slack.wait_for(lambda: calls_with(slack, "slow result"), WAIT)
            other = (await slack.user_message("U1", "D1", "and the docs")).event["ts"]
            await b.bot.outbox.owe(ThreadRef("D1", other), [{"op": "post", "message": "next"}])
            await slack.wait_for(lambda: calls_with(slack, "next"), WAIT)
        finally:
            await taker.close()
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR or r.exc_info]
    assert "delivered by another replica now" in caplog.text


def calls_with(slack: SlackEmulator, text: str) -> list[object]:
    return [c for c in slack.calls("chat.postMessage") if text in str(c.params)]


async def running_on(bot: Rig, jobs: list[str]) -> None:
    """Waits (bounded) until ``jobs`` are what runs on the replica ``bot``."""
    async with asyncio.timeout(WAIT):
        while bot.server.singletons.running() != jobs:
            await asyncio.sleep(0.05)


async def leases_metric(bot: Rig) -> dict[str, float]:
    async with (
        aiohttp.ClientSession() as session,
        session.get(f"http://127.0.0.1:{bot.server.health_port}/metrics") as response,
    ):
        text = await response.text()
    found = re.findall(r'^harness_leases_held\{lease="([^"]+)"\} (\S+)$', text, re.M)
    return {name: float(value) for name, value in found}


SINGLETONS = [PULL_REQUESTS, TAKE_OVER]


async def test_the_singletons_run_on_one_replica_and_move_to_another_when_it_stops(
    rig: RigFactory,
) -> None:
    async with rig(runtime=HeldRuntime(), health_port=0) as a:
        assert a.server.singletons.running() == SINGLETONS
        async with rig(runtime=HeldRuntime(), health_port=0) as b:
            assert b.server.singletons.running() == []
            assert await leases_metric(a) == dict.fromkeys(SINGLETONS, 1.0)
            assert await leases_metric(b) == dict.fromkeys(SINGLETONS, 0.0)

            await a.server.stop()  # its leases are handed on: B takes them at its next look
            await running_on(b, SINGLETONS)
            assert await leases_metric(b) == dict.fromkeys(SINGLETONS, 1.0)


async def test_a_replica_whose_lease_was_taken_over_stops_that_job(
    rig: RigFactory, store: StoreSettings
) -> None:
    async with rig(runtime=HeldRuntime(), health_port=0) as b:
        assert b.server.singletons.running() == SINGLETONS
        # Replica C, its clock a minute ahead, finds B's lease run out and takes it.
        ahead = FakeClock(datetime.now(UTC) + timedelta(minutes=1))
        taker = await NatsLeases.open(store, ahead)
        try:
            grant = await taker.take(PULL_REQUESTS, "replica-c", 6.0)
            assert grant.token is not None and grant.previous == b.server.leases.holder

            await running_on(b, [TAKE_OVER])  # B's next renewal is refused: it stops
            assert await leases_metric(b) == {PULL_REQUESTS: 0.0, TAKE_OVER: 1.0}
        finally:
            await taker.close()
