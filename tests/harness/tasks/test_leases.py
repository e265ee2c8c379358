"""Leases on the singletons: one suite that the in-process leases and the NATS ones pass (a
real nats-server), on a clock the tests move."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from harness.tasks.leases import Lease, LeaseKeeper, LocalLeases, NatsLeases
from harness.testing.clock import FakeClock
from tests.harness.tasks.nats_fixtures import module_server, settings_for

pytestmark = pytest.mark.anyio
server = module_server()
TTL = 15.0


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


class LeaseConformance:
    async def test_a_lease_has_one_holder_at_a_time(self, leases: Lease) -> None:
        token = await leases.acquire("routines", "bot-1", TTL)

        assert token is not None
        assert await leases.acquire("routines", "bot-2", TTL) is None
        held = await leases.holder("routines")
        assert held is not None and (held.holder, held.token) == ("bot-1", token)
        assert await leases.acquire("spares", "bot-2", TTL) is not None  # another name: free

    async def test_of_holders_racing_for_a_free_lease_exactly_one_wins(self, leases: Lease) -> None:
        tokens = await asyncio.gather(
            *(leases.acquire("recovery", f"bot-{n}", TTL) for n in range(8))
        )

        assert len([token for token in tokens if token is not None]) == 1

    async def test_a_holder_that_stops_renewing_loses_it_within_its_ttl(
        self, leases: Lease, clock: FakeClock
    ) -> None:
        token = await leases.acquire("routines", "bot-1", TTL)
        assert token is not None
        clock.advance(TTL * 0.9)
        renewed = await leases.renew("routines", token, TTL)
        assert renewed is not None  # renewed in time: still its own
        clock.advance(TTL * 0.9)
        assert await leases.acquire("routines", "bot-2", TTL) is None

        clock.advance(TTL * 0.2)  # past the renewed ttl

        assert await leases.holder("routines") is None
        taken = await leases.acquire("routines", "bot-2", TTL)
        assert taken is not None
        held = await leases.holder("routines")
        assert held is not None and held.holder == "bot-2"

    async def test_a_stale_token_is_refused_and_releases_nothing(
        self, leases: Lease, clock: FakeClock
    ) -> None:
        old = await leases.acquire("pull-requests", "bot-1", TTL)
        assert old is not None
        clock.advance(TTL + 1)
        new = await leases.acquire("pull-requests", "bot-2", TTL)
        assert new is not None

        assert await leases.renew("pull-requests", old, TTL) is None
        await leases.release("pull-requests", old)
        held = await leases.holder("pull-requests")
        assert held is not None and held.holder == "bot-2"

    async def test_acquiring_again_renews_and_makes_the_old_token_stale(
        self, leases: Lease
    ) -> None:
        first = await leases.acquire("routines", "bot-1", TTL)
        second = await leases.acquire("routines", "bot-1", TTL)

        assert first is not None and second is not None and first != second
        assert await leases.renew("routines", first, TTL) is None

    async def test_a_released_lease_is_free_for_another_at_once(self, leases: Lease) -> None:
        token = await leases.acquire("spares", "bot-1", TTL)
        assert token is not None

        await leases.release("spares", token)

        assert await leases.holder("spares") is None
        assert await leases.acquire("spares", "bot-2", TTL) is not None


class TestLocalLeases(LeaseConformance):
    @pytest.fixture
    def leases(self, clock: FakeClock) -> Lease:
        return LocalLeases(clock)


@pytest.mark.nats
class TestNatsLeases(LeaseConformance):
    @pytest.fixture
    async def leases(self, nats_url: str, clock: FakeClock) -> AsyncIterator[Lease]:
        leases = await NatsLeases.open(settings_for(nats_url), clock)
        yield leases
        await leases.close()


@pytest.mark.nats
async def test_two_processes_see_one_holder_and_the_second_takes_over_a_dead_one(
    nats_url: str, clock: FakeClock
) -> None:
    settings = settings_for(nats_url)
    first, second = await NatsLeases.open(settings, clock), await NatsLeases.open(settings, clock)
    try:
        token = await first.acquire("routines", "bot-1", TTL)
        assert token is not None
        assert await second.acquire("routines", "bot-2", TTL) is None

        await first.close()  # bot-1 dies holding it
        clock.advance(TTL + 0.5)

        grant = await second.take("routines", "bot-2", TTL)
        assert grant.token is not None and grant.previous == "bot-1"
    finally:
        await first.close()
        await second.close()


async def renewed(leases: Lease, name: str, after: int) -> int:
    """The token of ``name`` once its holder renewed it past ``after`` (bounded)."""
    async with asyncio.timeout(5):
        while (held := await leases.holder(name)) is None or held.token == after:
            await asyncio.sleep(0.01)
    return held.token


@pytest.mark.waits
async def test_a_keeper_renews_its_lease_so_it_outlives_its_first_ttl(clock: FakeClock) -> None:
    leases = LocalLeases(clock)
    keeper = LeaseKeeper(lambda: opened(leases), holder="bot-1", clock=clock)
    try:
        assert await keeper.hold("routines", 0.3)
        first = await leases.holder("routines")
        assert first is not None
        token = await renewed(leases, "routines", first.token)
        clock.advance(0.25)
        await renewed(leases, "routines", token)
        clock.advance(0.25)  # past the first ttl, within the renewed one

        assert await leases.acquire("routines", "bot-2", TTL) is None
        assert keeper.held() == ["routines"]
    finally:
        await keeper.close()


@pytest.mark.waits
async def test_a_keeper_whose_lease_another_took_is_told_and_lists_it_no_more(
    clock: FakeClock,
) -> None:
    leases = LocalLeases(clock)
    lost = asyncio.Event()
    keeper = LeaseKeeper(lambda: opened(leases), holder="bot-1", clock=clock)
    try:
        assert await keeper.hold("routines", 0.3, on_lost=lambda _name: lost.set())
        clock.advance(1.0)  # bot-1 was paused past its ttl: bot-2 takes the lease
        assert await leases.acquire("routines", "bot-2", TTL) is not None

        await asyncio.wait_for(lost.wait(), 5)

        assert keeper.held() == []
    finally:
        await keeper.close()


async def test_a_keeper_s_leases_go_to_another_at_once_when_it_closes(clock: FakeClock) -> None:
    leases = LocalLeases(clock)
    first = LeaseKeeper(lambda: opened(leases), holder="bot-1", clock=clock)
    second = LeaseKeeper(lambda: opened(leases), holder="bot-2", clock=clock)
    try:
        assert await first.hold("spares", TTL) and await first.hold("recovery", TTL)
        assert not await second.hold("spares", TTL)
        assert first.held() == ["recovery", "spares"]

        await first.close()

        assert await second.hold("spares", TTL)
        assert second.held() == ["spares"]
    finally:
        await first.close()
        await second.close()


async def opened(leases: Lease) -> Lease:
    return leases
