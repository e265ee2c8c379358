"""The time and the fresh ids the harness uses, from one place that tests can replace.

A ``Clock`` is handed to whatever reads the time to decide something or to record it, or
draws ids (the orchestrator and the parts it builds, the task stores, the workspaces, the
ledger, the bot); ``SYSTEM`` is the real one, ``harness.testing.clock.FakeClock`` one a test
sets and moves. Wall time (``now``) is for records and for what is compared with other
machines' or files' times; ``monotonic`` for durations, timeouts, rate limits and cache ages,
which must not jump when the wall clock is set. Timestamps are ISO 8601 in UTC with a ``Z``;
file names take a compact stamp.
"""

from __future__ import annotations

import secrets
import time
from datetime import UTC, datetime
from typing import Protocol


class Clock(Protocol):
    def now(self) -> datetime:
        """The current time, timezone-aware, in UTC."""
        ...

    def monotonic(self) -> float:
        """Seconds from an arbitrary start, never going back: only differences mean anything."""
        ...

    def token(self, nbytes: int) -> str:
        """``nbytes`` random bytes as lowercase hex (ids of agents, questions, runs)."""
        ...


class SystemClock:
    def now(self) -> datetime:
        return datetime.now(UTC)

    def monotonic(self) -> float:
        return time.monotonic()

    def token(self, nbytes: int) -> str:
        return secrets.token_hex(nbytes)


SYSTEM: Clock = SystemClock()


def timestamp(moment: datetime, *, precise: bool = False) -> str:
    """``2026-01-01T10:00:00.000Z`` (microseconds when ``precise``)."""
    spec = "microseconds" if precise else "milliseconds"
    return moment.astimezone(UTC).isoformat(timespec=spec).replace("+00:00", "Z")


def file_stamp(moment: datetime) -> str:
    """``20260101T100000Z``: a time in a file name."""
    return moment.astimezone(UTC).strftime("%Y%m%dT%H%M%SZ")
