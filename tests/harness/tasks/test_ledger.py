"""The ledger: seen keys, watches and the outbox, kept across a restart."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from harness.tasks.ledger import LEDGER_FILE, Ledger
from harness.testing.clock import START, FakeClock

pytestmark = pytest.mark.anyio


@pytest.fixture
async def ledger(tmp_path: Path) -> AsyncIterator[Ledger]:
    opened = await Ledger.open(tmp_path / LEDGER_FILE)
    yield opened
    await opened.close()


async def reopen(ledger: Ledger) -> Ledger:
    """The same ledger as a restarted process sees it."""
    await ledger.close()
    assert ledger.file is not None
    return await Ledger.open(ledger.file)


async def test_seen_keys_survive_a_restart_and_old_ones_are_forgotten(ledger: Ledger) -> None:
    now = time.time()
    await ledger.remember(["event:Ev1", "message:C1:1.1"], at=now - 10)
    await ledger.remember(["event:Ev0"], at=now - 7200)
    await ledger.remember(["event:Ev1"], at=now)  # seen again: keeps its first time

    again = await reopen(ledger)
    try:
        assert await again.recent(now - 3600) == [
            ("event:Ev1", now - 10),
            ("message:C1:1.1", now - 10),
        ]
        assert await again.recent(0) == [("event:Ev1", now - 10), ("message:C1:1.1", now - 10)]
    finally:
        await again.close()


async def test_a_key_is_claimed_once_even_by_racing_callers(ledger: Ledger) -> None:
    results = await asyncio.gather(*(ledger.claim("rerun:a1") for _ in range(10)))

    assert sorted(results) == [False] * 9 + [True]
    assert await ledger.claim("rerun:a2") is True


async def test_a_kept_request_and_what_was_noted_on_it_survive_a_restart(
    ledger: Ledger,
) -> None:
    await ledger.remember(["message:D1:1.1"], at=10.0, intake={"message:D1:1.1": {"text": "x"}})
    await ledger.annotate_intake("message:D1:1.1", waiting=True)
    await ledger.annotate_intake("message:D1:9.9", waiting=True)  # not kept: nothing added

    again = await reopen(ledger)
    try:
        assert await again.intake() == [("message:D1:1.1", {"text": "x", "waiting": True}, 10.0)]
        await again.handled("message:D1:1.1")
        assert await again.intake() == []
    finally:
        await again.close()


async def test_owing_a_result_settles_its_watch_in_the_same_step(ledger: Ledger) -> None:
    await ledger.watch("a1", {"thread": ["C1", "1.1"], "status": None})
    await ledger.watch("a1", {"thread": ["C1", "1.1"], "status": "1.2"})
    await ledger.watch("a2", {"thread": ["C1", "1.1"], "status": "1.3"})

    entry = await ledger.owe("C1/1.1", {"steps": [{"op": "post"}]}, settles="a1")

    again = await reopen(ledger)
    try:
        assert await again.watches() == [("a2", {"thread": ["C1", "1.1"], "status": "1.3"})]
        [owed] = await again.pending()
        assert (owed.id, owed.lane, owed.data, owed.step) == (
            entry,
            "C1/1.1",
            {"steps": [{"op": "post"}]},
            0,
        )
    finally:
        await again.close()


async def test_delivery_progress_retries_and_outcomes_are_kept(ledger: Ledger) -> None:
    first = await ledger.owe("C1/1.1", {"n": 1})
    second = await ledger.owe("C2/2.2", {"n": 2})
    third = await ledger.owe("C1/1.1", {"n": 3})

    await ledger.advance(first, 2)
    await ledger.postpone(first, 123.0, "internal_error")
    await ledger.give_up(second, "channel_not_found")
    await ledger.delivered(third)

    [pending] = await ledger.pending()
    assert (pending.id, pending.step, pending.attempts, pending.due, pending.error) == (
        first,
        2,
        1,
        123.0,
        "internal_error",
    )
    [failed] = await ledger.failed()
    assert (failed.id, failed.error, failed.data) == (second, "channel_not_found", {"n": 2})


async def test_an_unreadable_ledger_is_moved_aside_and_a_new_one_started(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    file = tmp_path / LEDGER_FILE
    file.write_bytes(b"this is not a database, just bytes " * 200)

    ledger = await Ledger.open(file)
    try:
        await ledger.remember(["event:Ev1"])
        assert [key for key, _ in await ledger.recent(0)] == ["event:Ev1"]
    finally:
        await ledger.close()
    [aside] = tmp_path.glob(f"{LEDGER_FILE}.damaged-*")
    assert aside.read_bytes().startswith(b"this is not a database")
    assert "moved to" in caplog.text


async def test_an_in_memory_ledger_works_alike() -> None:
    ledger = await Ledger.open(None)
    try:
        await ledger.watch("a1", {"x": 1})
        await ledger.owe("lane", {"y": 2}, settles="a1")
        assert await ledger.watches() == []
        assert [owed.data for owed in await ledger.pending()] == [{"y": 2}]
    finally:
        await ledger.close()


async def test_the_ledger_stamps_what_it_keeps_with_its_clock(tmp_path: Path) -> None:
    clock = FakeClock()
    file = tmp_path / LEDGER_FILE
    file.write_bytes(b"this is not a database, just bytes " * 200)

    ledger = await Ledger.open(file, clock)
    try:
        await ledger.remember(["event:Ev1"])
        clock.advance(3600)
        assert await ledger.claim("rerun:a1")
        entry = await ledger.owe("lane", {"n": 1})

        assert await ledger.recent(0) == [
            ("event:Ev1", START.timestamp()),
            ("rerun:a1", START.timestamp() + 3600),
        ]
        [owed] = await ledger.pending()
        assert (owed.id, owed.due) == (entry, clock.timestamp())  # due at once
        # An hour on, a window of half an hour forgets the first key.
        assert [key for key, _ in await ledger.recent(clock.timestamp() - 1800)] == ["rerun:a1"]
    finally:
        await ledger.close()
    assert (tmp_path / f"{LEDGER_FILE}.damaged-20260101T100000Z").is_file()
