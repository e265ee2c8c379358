"""The SQLite ledger: the conformance suite every ledger passes, and what only a file has (an
unreadable one moved aside, one kept in memory)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from harness.clock import Clock
from harness.tasks.ledger import LEDGER_FILE, SqliteLedger
from harness.tasks.ledger_protocol import Ledger
from harness.testing.clock import FakeClock
from tests.harness.tasks.ledger_suite import LedgerConformance, Ledgers

pytestmark = pytest.mark.anyio


class TestSqliteLedger(LedgerConformance):
    @pytest.fixture
    async def ledgers(self, tmp_path: Path) -> AsyncIterator[Ledgers]:
        async def make(clock: Clock) -> Ledger:
            return await SqliteLedger.open(tmp_path / LEDGER_FILE, clock)

        ledgers = Ledgers(make)
        yield ledgers
        await ledgers.close()


async def test_an_unreadable_ledger_is_moved_aside_and_a_new_one_started(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    file = tmp_path / LEDGER_FILE
    file.write_bytes(b"this is not a database, just bytes " * 200)

    ledger = await SqliteLedger.open(file, FakeClock())
    try:
        await ledger.remember(["event:Ev1"])
        assert [key for key, _ in await ledger.recent(0)] == ["event:Ev1"]
    finally:
        await ledger.close()
    [aside] = tmp_path.glob(f"{LEDGER_FILE}.damaged-*")
    assert aside.name == f"{LEDGER_FILE}.damaged-20260101T100000Z"
    assert aside.read_bytes().startswith(b"this is not a database")
    assert "moved to" in caplog.text


async def test_an_in_memory_ledger_works_alike() -> None:
    ledger = await SqliteLedger.open(None)
    try:
        await ledger.watch("a1", {"x": 1})
        await ledger.owe("lane", {"y": 2}, settles="a1")
        assert await ledger.watches() == []
        assert [owed.data for owed in await ledger.pending()] == [{"y": 2}]
    finally:
        await ledger.close()
