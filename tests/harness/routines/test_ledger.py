"""The firing ledger's one promise, kept by both implementations: each firing key is claimed
once, first one wins, even by many claimers at once; a real nats-server for the NATS one."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from harness.routines.ledger import FileFiringLedger, FiringLedger, NatsFiringLedger
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
