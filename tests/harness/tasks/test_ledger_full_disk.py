"""The ledger on a disk that is full: a write it refuses raises a clear error and keeps
nothing half-done, the file is never taken for a damaged one, what it holds still reads, and
``problem`` says why until a write succeeds again. SQLite's own limit on the file's pages
makes the disk full here (the same SQLITE_FULL a full volume answers)."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.tasks.ledger import LedgerUnwritableError, SqliteLedger

pytestmark = pytest.mark.anyio


async def cap_pages(ledger: SqliteLedger, pages: int | None = None) -> None:
    """No page beyond the file's current ones (or up to ``pages``): a full disk."""

    def cap() -> None:
        db = ledger._conn()
        limit = pages or db.execute("PRAGMA page_count").fetchone()[0]
        db.execute(f"PRAGMA max_page_count = {limit}")

    await ledger._call(cap, writes=False)


async def test_a_write_the_full_disk_refuses_raises_clearly_and_is_undone_until_space_returns(
    tmp_path: Path,
) -> None:
    ledger = await SqliteLedger.open(tmp_path / ".ledger.sqlite3")
    try:
        await ledger.watch("a1", {"thread": ["D1", "1.0"]})
        await cap_pages(ledger)

        with pytest.raises(LedgerUnwritableError) as refused:
            await ledger.owe("D1/1.0", {"steps": ["x" * 50_000]}, settles="a1")

        assert "database or disk is full" in refused.value.message
        assert "free space" in refused.value.fix
        assert ledger.problem is not None and "full" in ledger.problem
        # Nothing half-done: the watch it would have ended is still there, and it reads.
        assert [agent for agent, _ in await ledger.watches()] == ["a1"]
        assert await ledger.pending() == []
        assert await ledger.recent(0.0) == []  # forgetting old keys cannot fail the read
        assert sorted(p.name for p in tmp_path.iterdir() if "damaged" in p.name) == []

        await cap_pages(ledger, 1_000_000)  # space returns
        await ledger.owe("D1/1.0", {"steps": ["x" * 50_000]}, settles="a1")
        assert ledger.problem is None
        assert await ledger.watches() == []
        assert len(await ledger.pending()) == 1
    finally:
        await ledger.close()


async def test_a_probe_says_whether_the_disk_takes_writes_again(tmp_path: Path) -> None:
    ledger = await SqliteLedger.open(tmp_path / ".ledger.sqlite3")
    try:
        await ledger.remember(["event:1"])
        await cap_pages(ledger)
        with pytest.raises(LedgerUnwritableError):
            await ledger.remember([f"event:{n}-{'x' * 500}" for n in range(200)])
        assert ledger.problem is not None
        await cap_pages(ledger, 1_000_000)
        await ledger.probe()
        assert ledger.problem is None
    finally:
        await ledger.close()
