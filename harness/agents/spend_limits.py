"""The spend limits (config.yaml's ``limits:``) as a pure rule: who pays for a new agent,
and what it may spend given what its payers spent and what their live agents hold.

A person pays for the agents they ask for (an agent another agent drafted, for the task's
requester); a channel for its tasks' agents (a direct message's count to the person only); a
routine for its firings' agents. Windows are the UTC day and the UTC month the agent starts
in; an agent's cost counts to the day it started. A live agent's allowance counts as spent
until it ends, so agents at once never pass a limit between them.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Literal

from harness.config.limits_schema import WINDOWS, LimitSettings, LimitWindows, Window
from harness.errors import LimitError
from harness.tasks.model import Task
from harness.tasks.spending import Spend

PayerKind = Literal["person", "channel", "routine"]
_CONFIG_KEYS: dict[PayerKind, str] = {
    "person": "perPersonUsd",
    "channel": "perChannelUsd",
    "routine": "perRoutineUsd",
}
_IN_WORDS: dict[Window, tuple[str, str]] = {
    "day": ("daily", "today"),
    "month": ("monthly", "this month"),
}


@dataclass(frozen=True)
class Payer:
    kind: PayerKind
    name: str  # the Slack user or channel id, or the routine's name


@dataclass(frozen=True)
class Limit:
    payer: Payer
    window: Window
    usd: float
    overridden: bool  # set in limits.overrides for this payer

    @property
    def config_key(self) -> str:
        name = self.payer.name
        if self.overridden:
            return f"limits.overrides.{name}.{self.window}"
        return f"limits.{_CONFIG_KEYS[self.payer.kind]}.{self.window}"

    def in_words(self) -> str:
        adjective = _IN_WORDS[self.window][0]
        whose = {"person": "", "channel": "channel ", "routine": "routine "}[self.payer.kind]
        name = self.payer.name
        return f"the {adjective} limit of {whose}{name} (${self.usd:.2f}, {self.config_key})"


class SpendLimitError(LimitError):
    """A new agent a spend limit refuses: which limit, what its payer spent and holds in the
    window, and when the window ends."""

    def __init__(self, limit: Limit, spent: float, held: float, resets: datetime) -> None:
        when = _IN_WORDS[limit.window][1]
        holding = f" and live agents hold ${held:.2f}" if held else ""
        reset = resets.strftime("%Y-%m-%d %H:%M UTC")
        super().__init__(
            "SPEND_LIMIT_EXCEEDED",
            f"{limit.in_words()} is reached: ${spent:.2f} spent {when} (UTC){holding}; it "
            f"resets at {reset}",
            fix=f"wait until {reset}, or ask an admin to raise it for this task (the button "
            f"in the thread) or in config.yaml ({limit.config_key})",
        )
        self.limit = limit
        self.spent = spent
        self.held = held
        self.resets = resets


def payers(task: Task, requested_by: str | None) -> tuple[Payer, ...]:
    """Who pays for a new agent of ``task`` asked for by ``requested_by``."""
    found: list[Payer] = []
    person = requested_by or task.requester
    if person:
        found.append(Payer("person", person))
    channel = task.thread.channel if task.thread else None
    if channel and not channel.startswith("D"):
        found.append(Payer("channel", channel))
    if task.trigger is not None:
        found.append(Payer("routine", task.trigger.routine))
    return tuple(found)


def limits_of(settings: LimitSettings, payer: Payer) -> list[Limit]:
    windows: LimitWindows
    if payer.kind == "person":
        windows = settings.person(payer.name)
    elif payer.kind == "channel":
        windows = settings.channel(payer.name)
    else:
        windows = settings.per_routine
    own = settings.overrides.get(payer.name) if payer.kind != "routine" else None
    return [
        Limit(payer, window, usd, overridden=own is not None and own.of(window) is not None)
        for window in WINDOWS
        if (usd := windows.of(window)) is not None
    ]


def window_start(now: datetime, window: Window) -> datetime:
    """The start of the UTC day or month ``now`` is in."""
    day = now.astimezone(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    return day if window == "day" else day.replace(day=1)


def window_end(now: datetime, window: Window) -> datetime:
    start = window_start(now, window)
    if window == "day":
        return start + timedelta(days=1)
    return (start + timedelta(days=32)).replace(day=1)


def earliest_day(now: datetime) -> str:
    """The first UTC day any window of ``now`` counts (``Store.spending``'s ``since``)."""
    return window_start(now, "month").strftime("%Y-%m-%d")


def pays(row: Spend, payer: Payer) -> bool:
    if payer.kind == "person":
        return row.person == payer.name
    if payer.kind == "channel":
        return row.channel == payer.name
    return row.routine == payer.name


def allowance(
    settings: LimitSettings,
    who: Iterable[Payer],
    rows: Iterable[Spend],
    now: datetime,
    cap: float | None,
) -> float | None:
    """What a new agent may spend: ``cap`` (its role's and its task's) within what each of
    its payers' limits has left once their spending and live agents' allowances in the
    window are counted; None when nothing caps it. SpendLimitError names the first limit
    with nothing left."""
    rows = list(rows)
    left = cap
    for payer in who:
        for limit in limits_of(settings, payer):
            since = window_start(now, limit.window).strftime("%Y-%m-%d")
            mine = [row for row in rows if row.day >= since and pays(row, payer)]
            # A live agent's allowance stands for its cost until it ends.
            spent = sum(row.cost_usd or 0.0 for row in mine if row.held_usd is None)
            held = sum(row.held_usd or 0.0 for row in mine)
            room = limit.usd - spent - held
            if room <= 0:
                raise SpendLimitError(limit, spent, held, window_end(now, limit.window))
            left = room if left is None else min(left, room)
    return left
