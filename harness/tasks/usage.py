"""The usage view, as pure functions over spending rows (``tasks/spending.py``): what was
spent, grouped by person, channel, role, routine, repository, day or task. The totals add up
to what the model billed: the sum of every paid agent's ``cost_usd`` (simulated costs make no
row); a live agent's allowance is shown beside, never added in."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal, TypedDict, get_args

from harness.tasks.spending import Spend

UsageBy = Literal["person", "channel", "role", "routine", "repository", "day", "task"]
USAGE_BY: tuple[UsageBy, ...] = get_args(UsageBy)
NONE_KEY = "(none)"
DIRECT = "(direct messages)"


@dataclass(frozen=True)
class UsageLine:
    key: str
    cost_usd: float
    agents: int
    held_usd: float  # what its live agents may still spend


class UsageLineJson(TypedDict):
    key: str
    costUsd: float
    agents: int
    liveHeldUsd: float


class UsageJson(TypedDict):
    since: str
    by: str
    totalUsd: float
    lines: list[UsageLineJson]


def key_of(row: Spend, by: UsageBy) -> str:
    if by == "channel":
        channel = row.channel
        return DIRECT if channel is not None and channel.startswith("D") else channel or NONE_KEY
    value = {
        "person": row.person,
        "role": row.role,
        "routine": row.routine,
        "repository": row.repository,
        "day": row.day,
        "task": row.slug,
    }[by]
    return value or NONE_KEY


def usage(rows: Iterable[Spend], by: UsageBy) -> list[UsageLine]:
    """One line per key, the largest spend first (then by key)."""
    cost: dict[str, float] = {}
    agents: dict[str, int] = {}
    held: dict[str, float] = {}
    for row in rows:
        key = key_of(row, by)
        cost[key] = cost.get(key, 0.0) + (row.cost_usd or 0.0)
        agents[key] = agents.get(key, 0) + 1
        held[key] = held.get(key, 0.0) + (row.held_usd or 0.0)
    lines = [UsageLine(key, cost[key], agents[key], held[key]) for key in cost]
    return sorted(lines, key=lambda line: (-line.cost_usd, line.key))


def total(rows: Iterable[Spend]) -> float:
    return sum(row.cost_usd or 0.0 for row in rows)


def usage_json(rows: list[Spend], by: UsageBy, since: str) -> UsageJson:
    return {
        "since": since,
        "by": by,
        "totalUsd": total(rows),
        "lines": [
            {"key": ln.key, "costUsd": ln.cost_usd, "agents": ln.agents, "liveHeldUsd": ln.held_usd}
            for ln in usage(rows, by)
        ],
    }


def render_usage(rows: list[Spend], by: UsageBy, since: str) -> str:
    """The usage as a table for the terminal."""
    lines = usage(rows, by)
    if not lines:
        return f"No paid agent since {since} (UTC)."
    width = max(len(by), *(len(line.key) for line in lines))
    out = [f"Spend since {since} (UTC), by {by}:", f"{by:<{width}}  {'USD':>10}  agents"]
    for line in lines:
        live = f"  (live agents hold ${line.held_usd:.2f})" if line.held_usd else ""
        out.append(f"{line.key:<{width}}  {line.cost_usd:>10.4f}  {line.agents:>6}{live}")
    out.append(f"{'total':<{width}}  {total(rows):>10.4f}  {len(rows):>6}")
    return "\n".join(out)
