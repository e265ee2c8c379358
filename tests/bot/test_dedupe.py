"""What the bot has seen: a delivery again within the window is a duplicate, across a
restart too; once the window has passed it is new."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.dedupe import Dedupe
from harness.tasks.ledger import LEDGER_FILE, SqliteLedger
from harness.testing.clock import FakeClock

pytestmark = pytest.mark.anyio

HOUR = 3600.0


async def test_a_delivery_is_a_duplicate_within_the_window_across_a_restart_then_new(
    tmp_path: Path,
) -> None:
    clock = FakeClock()
    ledger = await SqliteLedger.open(tmp_path / LEDGER_FILE, clock)
    try:
        first = Dedupe(ledger, HOUR)  # the ledger's clock
        await first.load()
        assert first.first_time("event:Ev1")
        await first.save()
        assert not first.first_time("event:Ev1")

        clock.advance(HOUR - 1)
        restarted = Dedupe(ledger, HOUR)
        await restarted.load()
        assert not restarted.first_time("event:Ev1")  # Slack's retry, after a restart

        clock.advance(2)
        later = Dedupe(ledger, HOUR)
        await later.load()
        assert later.first_time("event:Ev1")  # the ledger forgot it
        assert restarted.first_time("event:Ev1")  # and so did the memory
    finally:
        await ledger.close()
