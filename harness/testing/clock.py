"""A clock a test sets and moves: time passes only when the test says so, so what depends on
it (a cache's age, a token's expiry, a rate limit, a dedupe window) is checked with no sleep."""

from __future__ import annotations

import secrets
from datetime import UTC, datetime, timedelta

START = datetime(2026, 1, 1, 10, 0, tzinfo=UTC)


class FakeClock:
    """A ``harness.clock.Clock`` standing still at ``start`` until ``advance`` or ``set``
    moves it. Wall and monotonic time move together (the monotonic one starts at 1000 s,
    never at zero, so a "never" of 0.0 or -1.0 stays in the past). Ids are random, as the
    system's: a test that needs fixed ids subclasses it."""

    def __init__(self, start: datetime = START) -> None:
        if start.tzinfo is None:
            raise ValueError("a clock's time is timezone-aware")
        self._now = start.astimezone(UTC)
        self._monotonic = 1000.0

    def now(self) -> datetime:
        return self._now

    def monotonic(self) -> float:
        return self._monotonic

    def token(self, nbytes: int) -> str:
        return secrets.token_hex(nbytes)

    def advance(self, seconds: float) -> None:
        """``seconds`` pass (never backwards: a monotonic clock does not go back)."""
        if seconds < 0:
            raise ValueError("time only moves forward; use set() to put the wall clock back")
        self._now += timedelta(seconds=seconds)
        self._monotonic += seconds

    def set(self, moment: datetime) -> None:
        """The wall clock is set to ``moment`` (as a person or NTP may); the monotonic one
        moves on by as much when that is forward, and stays when it is back."""
        if moment.tzinfo is None:
            raise ValueError("a clock's time is timezone-aware")
        step = (moment - self._now).total_seconds()
        self._now = moment.astimezone(UTC)
        self._monotonic += max(step, 0.0)

    def timestamp(self) -> float:
        """The wall time as epoch seconds (what a file's mtime or a ledger row holds)."""
        return self._now.timestamp()
