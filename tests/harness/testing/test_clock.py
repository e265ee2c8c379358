"""The clocks: the system's, and the fake one tests move by hand."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from harness.clock import SYSTEM, Clock
from harness.testing.clock import START, FakeClock


def test_the_system_clock_is_aware_utc_and_its_monotonic_time_never_goes_back() -> None:
    before = SYSTEM.monotonic()
    assert SYSTEM.now().tzinfo == UTC
    assert SYSTEM.monotonic() >= before
    assert len(SYSTEM.token(4)) == 8


def test_a_fake_clock_stands_still_until_moved_and_moves_both_times_together() -> None:
    clock: Clock = FakeClock()
    assert isinstance(clock, FakeClock)
    start = clock.monotonic()
    assert clock.now() == START and clock.now() == START  # no time passes by itself
    assert start > 0  # a "never" stamp of 0 or -1 stays in the past

    clock.advance(90.5)

    assert clock.now() == START + timedelta(seconds=90.5)
    assert clock.monotonic() == start + 90.5
    assert clock.timestamp() == (START + timedelta(seconds=90.5)).timestamp()


def test_setting_a_fake_clock_back_moves_only_the_wall_time() -> None:
    clock = FakeClock(datetime(2026, 3, 1, tzinfo=UTC))
    start = clock.monotonic()

    clock.set(datetime(2026, 2, 28, tzinfo=UTC))  # put back, as NTP may
    assert clock.now() == datetime(2026, 2, 28, tzinfo=UTC) and clock.monotonic() == start
    clock.set(datetime(2026, 2, 28, 0, 1, tzinfo=UTC))
    assert clock.monotonic() == start + 60

    with pytest.raises(ValueError, match="forward"):
        clock.advance(-1)
    with pytest.raises(ValueError, match="timezone"):
        clock.set(datetime(2026, 1, 1))  # naive: refused
