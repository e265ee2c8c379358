"""The spend limits' rule, with literals: who pays for a new agent, what it may spend, and
the limit named, with the spend and the reset, when nothing is left."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from harness.agents.spend_limits import (
    Payer,
    SpendLimitError,
    allowance,
    earliest_day,
    payers,
    window_end,
)
from harness.config.limits_schema import LimitSettings, LimitWindows
from harness.tasks.model import Task, ThreadRef, Trigger
from harness.tasks.spending import Spend

NOW = datetime(2026, 11, 28, 15, 30, tzinfo=UTC)
LIMITS = LimitSettings(
    per_person=LimitWindows(day=20, month=200),
    per_channel=LimitWindows(month=500),
    per_routine=LimitWindows(month=100),
    overrides={"U9": LimitWindows(month=1000), "C9": LimitWindows(month=2000)},
)


def spend(agent: str, day: str, cost: float | None = None, held: float | None = None,
          person: str | None = "U1", channel: str | None = None,
          routine: str | None = None) -> Spend:  # fmt: skip
    return Spend("t", agent, day, "developer", person, channel, routine, None, cost, held)


def test_the_person_the_channel_and_the_routine_pay_but_a_direct_message_only_the_person() -> None:
    nightly = Trigger(routine="nightly", kind="schedule", at="x", why="x")
    task = Task("t", "2026-11-28T10:00:00Z", thread=ThreadRef("C1", "1.1"), requester="U1",
                trigger=nightly)  # fmt: skip
    direct = Task("d", "2026-11-28T10:00:00Z", thread=ThreadRef("D1", "1.1"), requester="U1")

    assert payers(task, "U2") == (
        Payer("person", "U2"), Payer("channel", "C1"), Payer("routine", "nightly")
    )  # fmt: skip
    assert payers(task, None)[0] == Payer("person", "U1")  # a drafted agent: the requester
    assert payers(direct, None) == (Payer("person", "U1"),)


def test_an_agent_gets_the_least_room_left_under_its_payers_limits() -> None:
    rows = [
        spend("a1", "2026-11-28", cost=12.5),  # today: counts to the day and the month
        spend("a2", "2026-11-28", held=3.0),  # live: its allowance counts
        spend("a3", "2026-11-02", cost=100.0),  # this month only
        spend("a4", "2026-10-31", cost=500.0),  # last month: never
        spend("a5", "2026-11-28", cost=50.0, person="U2"),  # someone else's
    ]

    assert allowance(LIMITS, [Payer("person", "U1")], rows, NOW, cap=None) == 4.5
    assert allowance(LIMITS, [Payer("person", "U1")], rows, NOW, cap=3.0) == 3.0
    assert allowance(LIMITS, [Payer("person", "U3")], rows, NOW, cap=None) == 20.0
    assert allowance(LimitSettings(), [Payer("person", "U1")], rows, NOW, cap=None) is None


def test_a_person_over_their_daily_limit_is_told_which_limit_the_spend_and_the_reset() -> None:
    rows = [spend("a1", "2026-11-28", cost=18.0), spend("a2", "2026-11-28", held=2.0)]

    with pytest.raises(SpendLimitError) as over:
        allowance(LIMITS, [Payer("person", "U1")], rows, NOW, cap=None)

    assert over.value.code == "SPEND_LIMIT_EXCEEDED"
    assert over.value.message == (
        "the daily limit of U1 ($20.00, limits.perPersonUsd.day) is reached: $18.00 spent "
        "today (UTC) and live agents hold $2.00; it resets at 2026-11-29 00:00 UTC"
    )
    assert "raise it for this task" in (over.value.fix or "")
    assert over.value.limit.payer == Payer("person", "U1")


def test_an_override_replaces_the_window_it_names_and_keeps_the_others() -> None:
    month = [spend(f"a{i}", "2026-11-0{i}", cost=100.0, person="U9") for i in range(1, 6)]

    assert allowance(LIMITS, [Payer("person", "U9")], month, NOW, cap=None) == 20.0
    with pytest.raises(SpendLimitError) as over:
        allowance(LIMITS, [Payer("channel", "C1")], [spend("c", "2026-11-01", cost=500.0,
                  channel="C1")], NOW, cap=None)  # fmt: skip
    assert over.value.message.startswith(
        "the monthly limit of channel C1 ($500.00, limits.perChannelUsd.month) is reached: "
        "$500.00 spent this month (UTC); it resets at 2026-12-01 00:00 UTC"
    )
    big = [spend("c", "2026-11-01", cost=1999.0, channel="C9")]
    assert allowance(LIMITS, [Payer("channel", "C9")], big, NOW, cap=None) == 1.0


def test_windows_are_utc_days_and_months() -> None:
    late = datetime(2026, 12, 31, 23, 59, tzinfo=UTC)

    assert earliest_day(NOW) == "2026-11-01"
    assert window_end(late, "day") == datetime(2027, 1, 1, tzinfo=UTC)
    assert window_end(late, "month") == datetime(2027, 1, 1, tzinfo=UTC)
    assert window_end(NOW, "month") == datetime(2026, 12, 1, tzinfo=UTC)
