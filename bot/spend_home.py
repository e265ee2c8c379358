"""The App Home's spend: a person's own spend today and this month (UTC) against their
limits; for an admin, the team's this month by person and by channel, and the top tasks.
``spend_blocks`` is pure; the home tab (``bot/home.py``) reads the rows and shows them."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from bot.blocks import escape
from harness.agents.spend_limits import window_start
from harness.config.limits_schema import LimitSettings
from harness.tasks.spending import Spend
from harness.tasks.usage import UsageBy, usage

_TOP = 8  # lines per admin table


def _section(text: str) -> dict[str, Any]:
    return {"type": "section", "text": {"type": "mrkdwn", "text": text}}


def _against(spent: float, limit: float | None) -> str:
    return f"${spent:.2f}" + (f" of ${limit:.2f}" if limit is not None else "")


def _who(key: str, by: UsageBy) -> str:
    if by == "person" and key.startswith(("U", "W")):
        return f"<@{escape(key)}>"
    if by == "channel" and key.startswith(("C", "G")):
        return f"<#{escape(key)}>"
    return f"`{escape(key)}`" if by == "task" else escape(key)


def spend_blocks(
    user: str, rows: Sequence[Spend], limits: LimitSettings, now: datetime, *, admin: bool
) -> list[dict[str, Any]]:
    """``rows``: this UTC month's spending (``Store.spending``)."""
    today = window_start(now, "day").strftime("%Y-%m-%d")
    month = window_start(now, "month").strftime("%Y-%m-%d")
    rows = [row for row in rows if row.day >= month]
    mine = [row for row in rows if row.person == user]
    spent_today = sum(row.cost_usd or 0.0 for row in mine if row.day >= today)
    spent_month = sum(row.cost_usd or 0.0 for row in mine)
    own = limits.person(user)
    blocks: list[dict[str, Any]] = [
        {"type": "divider"},
        {"type": "header", "text": {"type": "plain_text", "text": "Your spend (UTC)"}},
        _section(
            f"Today {_against(spent_today, own.day)} · this month "
            f"{_against(spent_month, own.month)}"
        ),
    ]
    if not admin:
        return blocks
    total = sum(row.cost_usd or 0.0 for row in rows)
    blocks.append(
        {"type": "header", "text": {"type": "plain_text", "text": "Team spend this month"}}
    )
    blocks.append(_section(f"${total:.2f} in all, {len(rows)} paid agent(s)"))
    tables: tuple[tuple[UsageBy, str], ...] = (
        ("person", "By person"),
        ("channel", "By channel"),
        ("task", "Top tasks"),
    )
    for by, title in tables:
        lines = usage(rows, by)[:_TOP]
        if lines:
            shown = "\n".join(f"{_who(ln.key, by)}: ${ln.cost_usd:.2f}" for ln in lines)
            blocks.append(_section(f"*{title}*\n{shown}"))
    return blocks
