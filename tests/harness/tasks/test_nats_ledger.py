"""The NATS ledger on a real nats-server: the conformance suite every ledger passes, and what
replicas sharing one need: a thread delivered by one process at a time, taken over when its
process dies, and a stale holder refused."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from harness.clock import Clock
from harness.config.store_schema import StoreSettings
from harness.tasks.ledger_protocol import Ledger, LedgerClaimLostError, LedgerUnwritableError
from harness.tasks.nats_ledger import CLAIM_SECONDS, NatsLedger
from harness.testing.clock import FakeClock
from harness.testing.nats_server import NatsServer
from tests.harness.tasks.ledger_suite import LedgerConformance, Ledgers
from tests.harness.tasks.nats_fixtures import module_server, settings_for

pytestmark = [pytest.mark.anyio, pytest.mark.nats]
server = module_server()


@pytest.fixture
async def ledgers(nats_url: str) -> AsyncIterator[Ledgers]:
    settings = settings_for(nats_url)

    async def make(clock: Clock) -> Ledger:
        return await NatsLedger.open(settings, clock)

    ledgers = Ledgers(make)
    yield ledgers
    await ledgers.close()


class TestNatsLedger(LedgerConformance):
    pass


async def test_a_thread_is_delivered_by_one_process_and_waits_for_the_other_s_claim(
    ledgers: Ledgers,
) -> None:
    clock = FakeClock()
    first, second = await ledgers.open(clock), await ledgers.open(clock)
    entry = await first.owe("C1/1.1", {"n": 1})
    other = await first.owe("C2/2.2", {"n": 2})

    [mine, theirs] = await first.pending()
    assert (mine.id, mine.due) == (entry, clock.timestamp())

    # The second process sees both threads' entries, but C1's and C2's come due for it only
    # when the first's claims would expire: it never delivers them meanwhile.
    seen = await second.pending()
    assert [owed.id for owed in seen] == [entry, other]
    assert {owed.due for owed in seen} == {clock.timestamp() + CLAIM_SECONDS}
    with pytest.raises(LedgerClaimLostError):
        await second.delivered(entry)

    await first.delivered(entry)
    await first.delivered(theirs.id)
    # Delivered: the threads are free again, and a new entry on one is the second's at once.
    later = await second.owe("C1/1.1", {"n": 3})
    [owed] = await second.pending()
    assert (owed.id, owed.due, owed.attempts) == (later, clock.timestamp(), 0)


async def test_a_dead_holder_s_thread_is_taken_over_and_the_stale_holder_refused(
    ledgers: Ledgers,
) -> None:
    clock = FakeClock()
    first, second = await ledgers.open(clock), await ledgers.open(clock)
    entry = await first.owe("C1/1.1", {"steps": ["post", "react"]})
    await first.pending()
    await first.advance(entry, 1)

    clock.advance(CLAIM_SECONDS + 1)  # the first stopped renewing: its claim ran out
    [taken] = await second.pending()

    # One more attempt: the outbox looks for the post the first may have made before.
    assert (taken.id, taken.step, taken.attempts, taken.due) == (entry, 1, 1, taken.due)
    for stale_write in (first.advance(entry, 2), first.delivered(entry)):
        with pytest.raises(LedgerClaimLostError):
            await stale_write
    await second.delivered(entry)
    assert await first.pending() == [] and await second.pending() == []


async def test_a_holder_that_renews_in_time_keeps_its_thread(ledgers: Ledgers) -> None:
    clock = FakeClock()
    first, second = await ledgers.open(clock), await ledgers.open(clock)
    entry = await first.owe("C1/1.1", {"n": 1})
    await first.pending()

    for _ in range(3):
        clock.advance(CLAIM_SECONDS * 0.6)
        await first.postpone(entry, clock.timestamp(), "ratelimited")  # renews its claim
        [waiting] = await second.pending()
        assert waiting.due > clock.timestamp()

    await first.delivered(entry)


async def test_an_entry_whose_claim_was_never_made_is_not_owed(
    ledgers: Ledgers, nats_url: str
) -> None:
    clock = FakeClock()
    ledger = await ledgers.open(clock)
    assert isinstance(ledger, NatsLedger)
    # What a process that stopped inside owe_once leaves: the entry, not its claim.
    kv = await ledger._kv()  # writing as a stopped process would
    await kv[1].create("owed.1", b'{"lane":"C1/1.1","data":{},"step":0,"attempts":0,'
                                 b'"due":0,"state":"pending","error":null,"created":%d,'
                                 b'"claim":"result:a1"}' % int(clock.timestamp()))  # fmt: skip

    assert await ledger.pending() == []
    assert await ledger.owe_once("result:a1", "C1/1.1", {"n": "result"}) is not None
    assert [owed.data for owed in await ledger.pending()] == [{"n": "result"}]


async def test_a_ledger_whose_server_is_gone_refuses_writes_and_takes_them_again(
    tmp_path: Path,
) -> None:
    async with NatsServer(tmp_path / "js") as server:
        ledger = await NatsLedger.open(StoreSettings(kind="nats", url=server.url, prefix="gone"))
        try:
            await ledger.remember(["event:Ev1"])
            await server.stop()

            with pytest.raises(LedgerUnwritableError) as refused:
                await ledger.probe()
            assert refused.value.fix is not None and "nats-server" in refused.value.fix
            assert ledger.problem is not None and server.url in ledger.problem

            await server.start()
            await ledger.probe()
            assert ledger.problem is None
            assert [key for key, _ in await ledger.recent(0)] == ["event:Ev1"]
        finally:
            await ledger.close()


async def test_a_stale_holder_is_refused_even_once_the_thread_is_free_again(
    ledgers: Ledgers,
) -> None:
    clock = FakeClock()
    first, second = await ledgers.open(clock), await ledgers.open(clock)
    entry = await first.owe("C1/1.1", {"steps": ["post", "react"]})
    await first.pending()
    clock.advance(CLAIM_SECONDS + 1)
    await second.pending()  # takes the thread over: the entry is changed (one more attempt)
    clock.advance(CLAIM_SECONDS + 1)  # and the second stops too: the thread is free

    # The first's claim could be made again, but the entry is not as it read it: refused.
    with pytest.raises(LedgerClaimLostError):
        await first.advance(entry, 1)
    # Read again, the entry is the first's to go on with, from where the second left it.
    [owed] = await first.pending()
    assert (owed.id, owed.step, owed.attempts) == (entry, 0, 1)
    await first.advance(entry, 1)
