"""When a routine fires: five-field cron in its time zone, across daylight-saving changes, and
which slots are due after the bot was away (run once within catchUp, else missed)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from harness.config.cron import parse_cron
from harness.config.routines_schema import Routine
from harness.problems import Invalid
from harness.routines.schedule import due, next_firing


def routine(schedule: str, timezone: str = "UTC", catch_up: float = 30) -> Routine:
    return Routine(
        name="nightly",
        kind="schedule",
        channel="C1",
        role="developer",
        prompt="p",
        schedule=parse_cron(schedule),
        timezone=timezone,
        catch_up=timedelta(minutes=catch_up),
    )


def utc(
    year: int, month: int, day: int, hour: int = 0, minute: int = 0, second: int = 0
) -> datetime:
    return datetime(year, month, day, hour, minute, second, tzinfo=UTC)


@pytest.mark.parametrize(
    ("schedule", "timezone", "after", "expected"),
    [
        # 02:00 on weekdays in Paris (UTC+1 in winter): Saturday's next is Monday's.
        ("0 2 * * 1-5", "Europe/Paris", utc(2026, 1, 2, 1, 0), utc(2026, 1, 5, 1, 0)),
        ("0 2 * * 1-5", "Europe/Paris", utc(2026, 1, 1, 12, 0), utc(2026, 1, 2, 1, 0)),
        # In summer the same wall time is an hour earlier in UTC.
        ("0 2 * * *", "Europe/Paris", utc(2026, 7, 1, 12, 0), utc(2026, 7, 2, 0, 0)),
        ("*/15 * * * *", "UTC", utc(2026, 1, 1, 10, 7), utc(2026, 1, 1, 10, 15)),
        ("* * * * *", "UTC", utc(2026, 1, 1, 10, 0), utc(2026, 1, 1, 10, 1)),  # strictly after
        ("0 9 1 jan,jul *", "UTC", utc(2026, 1, 1, 10, 0), utc(2026, 7, 1, 9, 0)),
        ("0 0 29 2 *", "UTC", utc(2026, 3, 1, 0, 0), utc(2028, 2, 29, 0, 0)),
        # Both day fields restricted: either matches (the 13th, or a Friday).
        ("0 0 13 * 5", "UTC", utc(2026, 1, 1, 0, 0), utc(2026, 1, 2, 0, 0)),
        ("0 0 * * 7", "UTC", utc(2026, 1, 1, 0, 0), utc(2026, 1, 4, 0, 0)),  # 7 is Sunday
        ("@daily", "America/New_York", utc(2026, 1, 1, 10, 0), utc(2026, 1, 2, 5, 0)),
    ],
)
def test_the_next_firing_is_the_schedules_next_wall_time_in_its_zone(
    schedule: str, timezone: str, after: datetime, expected: datetime
) -> None:
    assert next_firing(routine(schedule, timezone), after) == expected


def test_a_wall_time_the_clock_skips_in_spring_fires_just_past_the_change() -> None:
    # Paris, 2026-03-29: 02:00 CET becomes 03:00 CEST; 02:30 does not exist that night.
    nightly = routine("30 2 * * *", "Europe/Paris")

    fired = next_firing(nightly, utc(2026, 3, 28, 12, 0))

    assert fired == utc(2026, 3, 29, 1, 30)  # 03:30 CEST
    assert next_firing(nightly, fired) == utc(2026, 3, 30, 0, 30)  # 02:30 CEST the day after


def test_a_wall_time_shown_twice_in_autumn_fires_once() -> None:
    # Paris, 2026-10-25: 03:00 CEST goes back to 02:00 CET; 02:30 happens twice.
    nightly = routine("30 2 * * *", "Europe/Paris")

    fired = next_firing(nightly, utc(2026, 10, 24, 12, 0))

    assert fired == utc(2026, 10, 25, 0, 30)  # the first 02:30, CEST
    assert next_firing(nightly, fired) == utc(2026, 10, 26, 1, 30)  # not the second one


@pytest.mark.parametrize(
    ("schedule", "problem"),
    [
        ("0 2 * *", "'0 2 * *' has 4 field(s), not five"),
        ("60 * * * *", "minute 60 is out of range 0-59"),
        ("0 0 30 2 *", "'0 0 30 2 *' names no date that exists"),
        ("*/0 * * * *", "a step of 0 in the minute field"),
        ("0 0 * * fri-mon", "the day of week range fri-mon runs backwards"),
        ("0 0 * * funday", "'funday' is not a day of week"),
    ],
)
def test_a_bad_schedule_says_which_field_is_wrong(schedule: str, problem: str) -> None:
    with pytest.raises(Invalid) as caught:
        parse_cron(schedule)

    assert caught.value.problem == problem
    assert "five fields" in caught.value.fix


def test_a_slot_missed_while_down_runs_once_when_within_catch_up() -> None:
    hourly = routine("0 * * * *", catch_up=30)

    found = due(hourly, utc(2026, 1, 1, 9, 30), utc(2026, 1, 1, 10, 20))

    assert found.run == utc(2026, 1, 1, 10, 0)
    assert found.missed == 0


def test_older_slots_are_missed_and_only_the_newest_may_run() -> None:
    hourly = routine("0 * * * *", catch_up=30)

    within = due(hourly, utc(2026, 1, 1, 6, 30), utc(2026, 1, 1, 10, 20))
    too_old = due(hourly, utc(2026, 1, 1, 6, 30), utc(2026, 1, 1, 10, 40))

    assert (within.run, within.missed, within.first_missed) == (
        utc(2026, 1, 1, 10, 0),
        3,
        utc(2026, 1, 1, 7, 0),
    )
    assert (too_old.run, too_old.missed, too_old.last) == (None, 4, utc(2026, 1, 1, 10, 0))


def test_a_slot_a_few_seconds_late_is_on_time_even_without_catch_up() -> None:
    minutely = routine("* * * * *", catch_up=0)

    found = due(minutely, utc(2026, 1, 1, 10, 0), utc(2026, 1, 1, 10, 1, 2))

    assert found.run == utc(2026, 1, 1, 10, 1)


def test_nothing_is_due_before_the_next_slot() -> None:
    found = due(routine("0 * * * *"), utc(2026, 1, 1, 10, 0), utc(2026, 1, 1, 10, 59))

    assert (found.run, found.missed, found.last) == (None, 0, None)
