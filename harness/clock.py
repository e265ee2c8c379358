"""The time and the fresh ids the harness uses, from one place that tests can replace.

A ``Clock`` is handed to whatever stamps records or draws ids (the orchestrator and the parts
it builds, the task stores); ``SYSTEM`` is the real one. Timestamps are ISO 8601 in UTC with a
``Z``; file names take a compact stamp.
"""

from __future__ import annotations

import secrets
from datetime import UTC, datetime
from typing import Protocol


class Clock(Protocol):
    def now(self) -> datetime:
        """The current time, timezone-aware, in UTC."""
        ...

    def token(self, nbytes: int) -> str:
        """``nbytes`` random bytes as lowercase hex (ids of agents, questions, runs)."""
        ...


class SystemClock:
    def now(self) -> datetime:
        return datetime.now(UTC)

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
