"""Five-field cron expressions (``minute hour day-of-month month day-of-week``) and the next
time one fires in a time zone. Pure: no clock, no file.

Each field takes ``*``, numbers, ranges ``a-b``, steps ``*/n`` and ``a-b/n``, lists ``a,b``,
and names for months and days (``jan``, ``mon``); 0 and 7 are both Sunday. When both day
fields are restricted, a day matching either fires (as Vixie cron does).

Across a daylight-saving change a schedule follows the local clock: a time the clock skips
(02:30 on the night it jumps from 02:00 to 03:00) fires at the same distance past the change
(03:30), and a time it shows twice (02:30 on the night it goes back) fires once, the first time.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from datetime import time as wall_time
from zoneinfo import ZoneInfo

from harness.problems import Invalid

_MONTHS = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
_DAYS = ("sun", "mon", "tue", "wed", "thu", "fri", "sat")
_MACROS = {
    "@hourly": "0 * * * *",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@weekly": "0 0 * * 0",
    "@monthly": "0 0 1 * *",
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
}
# (name, least, most, names from least on)
_FIELDS: tuple[tuple[str, int, int, tuple[str, ...]], ...] = (
    ("minute", 0, 59, ()),
    ("hour", 0, 23, ()),
    ("day of month", 1, 31, ()),
    ("month", 1, 12, _MONTHS),
    ("day of week", 0, 7, _DAYS),
)
_PART = re.compile(r"^(\*|[a-z0-9]+(?:-[a-z0-9]+)?)(?:/(\d+))?$")
CRON_FIX = (
    "write five fields, minute hour day-of-month month day-of-week, e.g. `0 2 * * 1-5` "
    "(02:00 on weekdays) or `*/15 * * * *` (every quarter hour)"
)
# A schedule no date matches (`0 0 30 2 *`) is refused when it is read; this bounds the search.
_HORIZON_DAYS = 366 * 8


@dataclass(frozen=True)
class Cron:
    expression: str
    minutes: frozenset[int]
    hours: frozenset[int]
    days: frozenset[int]
    months: frozenset[int]
    weekdays: frozenset[int]  # 0 is Sunday
    any_day: bool  # day of month written `*`
    any_weekday: bool  # day of week written `*`

    def day_matches(self, day: date) -> bool:
        if day.month not in self.months:
            return False
        in_month = day.day in self.days
        in_week = (day.isoweekday() % 7) in self.weekdays
        if self.any_day or self.any_weekday:
            return in_month and in_week
        return in_month or in_week


def _value(text: str, least: int, most: int, names: tuple[str, ...], what: str) -> int:
    if text.isdigit():
        number = int(text)
    elif text in names:
        number = names.index(text) + (1 if names is _MONTHS else 0)
    else:
        raise Invalid(f"{text!r} is not a {what}", fix=CRON_FIX)
    if not least <= number <= most:
        raise Invalid(f"{what} {number} is out of range {least}-{most}", fix=CRON_FIX)
    return number


def _field(text: str, spec: tuple[str, int, int, tuple[str, ...]]) -> frozenset[int]:
    what, least, most, names = spec
    values: set[int] = set()
    for part in text.lower().split(","):
        match = _PART.match(part)
        if match is None:
            raise Invalid(f"{part!r} is not a valid {what} field", fix=CRON_FIX)
        span, step_text = match.groups()
        step = int(step_text) if step_text else 1
        if step == 0:
            raise Invalid(f"a step of 0 in the {what} field", fix=CRON_FIX)
        if span == "*":
            first, last = least, most
        elif "-" in span:
            low, high = span.split("-")
            first = _value(low, least, most, names, what)
            last = _value(high, least, most, names, what)
            if first > last:
                raise Invalid(f"the {what} range {span} runs backwards", fix=CRON_FIX)
        else:
            first = _value(span, least, most, names, what)
            last = most if step_text else first
        values.update(range(first, last + 1, step))
    return frozenset(values)


def parse_cron(expression: str) -> Cron:
    """The schedule ``expression`` describes; ``Invalid`` saying which field is wrong."""
    text = _MACROS.get(expression.strip().lower(), expression)
    fields = text.split()
    if len(fields) != 5:
        raise Invalid(f"{expression!r} has {len(fields)} field(s), not five", fix=CRON_FIX)
    minutes, hours, days, months, weekdays = (
        _field(text, spec) for text, spec in zip(fields, _FIELDS, strict=True)
    )
    cron = Cron(
        expression=expression,
        minutes=minutes,
        hours=hours,
        days=days,
        months=months,
        weekdays=frozenset(day % 7 for day in weekdays),
        any_day=fields[2] == "*",
        any_weekday=fields[4] == "*",
    )
    if not any(cron.day_matches(date(2028, 1, 1) + timedelta(days=n)) for n in range(366 * 4)):
        raise Invalid(f"{expression!r} names no date that exists", fix=CRON_FIX)
    return cron


def next_time(cron: Cron, zone: ZoneInfo, after: datetime) -> datetime:
    """The first time strictly after ``after`` at which ``cron`` fires in ``zone``, in UTC."""
    after = after.astimezone(UTC)
    local = after.astimezone(zone)
    day = local.date()
    for _ in range(_HORIZON_DAYS):
        if cron.day_matches(day):
            for hour in sorted(cron.hours):
                for minute in sorted(cron.minutes):
                    naive = datetime.combine(day, wall_time(hour, minute))
                    # fold=0: a time shown twice fires the first time; a skipped one past the gap.
                    moment = naive.replace(tzinfo=zone).astimezone(UTC)
                    if moment > after:
                        return moment
        day += timedelta(days=1)
    raise Invalid(f"{cron.expression!r} does not fire within eight years", fix=CRON_FIX)
