"""One line of ``harness doctor``: a check's name, its status and what it found, with the fix
under a failure or a warning; and the exit code of them all. Pure."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

# "skip": a part the set-up does not use, said so that its absence is not a surprise.
Status = Literal["ok", "warn", "fail", "skip"]

NETWORK_SECONDS = 3.0  # each call to Slack, the model's API, GitHub and NATS
MARKS: Mapping[Status, str] = {"ok": "✓", "warn": "!", "fail": "✗", "skip": "-"}


@dataclass(frozen=True)
class Check:
    name: str
    status: Status
    detail: str
    fix: str = ""


def render(checks: Sequence[Check]) -> str:
    """One line per check, a ``fix:`` line under each failure or warning that has one."""
    lines: list[str] = []
    for check in checks:
        lines.append(f"{MARKS[check.status]} {check.name}: {check.detail}")
        if check.status in ("warn", "fail") and check.fix:
            lines.append(f"  fix: {check.fix}")
    return "\n".join(lines)


def exit_code(checks: Sequence[Check]) -> int:
    return 1 if any(check.status == "fail" for check in checks) else 0
