"""The firing ledger's one promise, kept by both implementations: each firing key is claimed
once, first one wins, even by many claimers at once; a real nats-server for the NATS one."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from harness.routines.ledger import KEEP_DAYS, FileFiringLedger, FiringLedger, NatsFiringLedger
from harness.testing.clock import FakeClock
from harness.testing.nats_server import NatsServer

pytestmark = pytest.mark.anyio


@pytest.fixture(params=["file", pytest.param("nats", marks=pytest.mark.nats)])
async def ledgers(
    request: pytest.FixtureRequest, tmp_path: Path
) -> AsyncIterator[list[FiringLedger]]:
    """Two ledgers over one store, as two bot processes would have."""
    if request.param == "file":
        yield [FileFiringLedger(tmp_path / "fired"), FileFiringLedger(tmp_path / "fired")]
        return
    import nats

    async with NatsServer(tmp_path / "nats") as server:
        clients = [await nats.connect(server.url), await nats.connect(server.url)]
        try:
            yield [await NatsFiringLedger.open(c.jetstream(), "TEST_ROUTINES") for c in clients]
        finally:
            for client in clients:
                await client.close()


async def test_a_firing_is_claimed_once_across_ledgers(ledgers: list[FiringLedger]) -> None:
    first, second = ledgers

    assert await first.claim("nightly", "schedule:2026-01-01T02:00:00.000Z") is True
    assert await second.claim("nightly", "schedule:2026-01-01T02:00:00.000Z") is False
    assert await first.claim("nightly", "schedule:2026-01-01T02:00:00.000Z") is False


async def test_other_keys_and_other_routines_are_claimed_apart(ledgers: list[FiringLedger]) -> None:
    first, second = ledgers

    assert await first.claim("nightly", "github:abc") is True
    assert await second.claim("weekly", "github:abc") is True
    assert await second.claim("nightly", "github:abd") is True


async def test_many_claims_at_once_have_one_winner(ledgers: list[FiringLedger]) -> None:
    claims = [ledger.claim("nightly", "http:x/../y z") for ledger in ledgers for _ in range(10)]

    won = await asyncio.gather(*claims)

    assert won.count(True) == 1


async def test_a_claim_keeps_its_owner_for_whoever_asks(ledgers: list[FiringLedger]) -> None:
    first, second = ledgers

    assert await second.owner("nightly", "github:abc") is None
    assert await first.claim("nightly", "github:abc", "process-1") is True
    assert await second.claim("nightly", "github:abc", "process-2") is False
    assert await second.owner("nightly", "github:abc") == "process-1"


async def test_a_file_ledger_forgets_claims_older_than_it_keeps_them(tmp_path: Path) -> None:
    clock = FakeClock(datetime.now(UTC))
    ledger = FileFiringLedger(tmp_path / "fired", clock)
    assert await ledger.claim("nightly", "schedule:old") is True
    clock.advance((KEEP_DAYS - 1) * 86400)
    assert await ledger.claim("nightly", "schedule:newer") is True  # old: a day short

    kept = await ledger.claim("nightly", "schedule:old")
    clock.advance(2 * 86400)
    assert await ledger.claim("nightly", "schedule:newest") is True  # old: past the limit

    assert kept is False  # still claimed a day short of the limit
    assert await ledger.claim("nightly", "schedule:old") is True  # forgotten past it
    assert await ledger.claim("nightly", "schedule:newer") is False
    assert len(list((tmp_path / "fired" / "nightly").iterdir())) == 3
