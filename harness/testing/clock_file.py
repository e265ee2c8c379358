"""A clock whose wall time a test sets from outside the process: the time is read from a file
at each look, so a test moves a real ``harness bot`` process across a firing time by writing
the file, with no wait for the real minute to turn."""

from __future__ import annotations

import secrets
import time
from datetime import UTC, datetime
from pathlib import Path

from harness.atomic import write_atomic


def set_time(file: Path, moment: datetime) -> None:
    """Every ``FileClock`` on ``file`` reads ``moment`` from now on."""
    write_atomic(file, moment.astimezone(UTC).isoformat().encode("utf-8"))


class FileClock:
    """A ``harness.clock.Clock`` whose ``now`` is the time ``file`` holds (ISO 8601, written
    by ``set_time``). Durations and ids are the system's: only the wall time is the test's."""

    def __init__(self, file: Path) -> None:
        self.file = file

    def now(self) -> datetime:
        return datetime.fromisoformat(self.file.read_text(encoding="utf-8").strip())

    def monotonic(self) -> float:
        return time.monotonic()

    def token(self, nbytes: int) -> str:
        return secrets.token_hex(nbytes)
