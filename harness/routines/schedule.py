"""When a routine fires next, and which of its slots were missed while nobody watched. Pure."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from harness.config.cron import next_time
from harness.config.routines_schema import Routine

# A slot this late is still on time (a tick of a busy loop), whatever `catchUp` says.
ON_TIME = timedelta(seconds=60)
# How many missed slots are looked at one by one before the rest are only counted.
_MOST_MISSED = 1000


def next_firing(routine: Routine, after: datetime) -> datetime | None:
    """The first slot strictly after ``after`` (UTC); None for a routine with no schedule."""
    if routine.schedule is None:
        return None
    return next_time(routine.schedule, routine.zone, after)


@dataclass(frozen=True)
class Due:
    """The slots in (last, now]: ``run`` is the one to start (None when none is), ``missed``
    those given up, with the first and last of them; ``last`` the newest slot handled."""

    run: datetime | None
    missed: int
    first_missed: datetime | None
    last_missed: datetime | None
    last: datetime | None


def due(routine: Routine, last: datetime, now: datetime) -> Due:
    """Which slots after ``last`` are due at ``now``: the newest runs when it is within
    ``catchUp`` (or on time); every older one, and the newest when too old, is missed."""
    slots: list[datetime] = []
    slot = next_firing(routine, last)
    missed_beyond = 0
    while slot is not None and slot <= now:
        if len(slots) < _MOST_MISSED:
            slots.append(slot)
        else:
            slots[-1] = slot
            missed_beyond += 1
        slot = next_firing(routine, slot)
    if not slots:
        return Due(None, 0, None, None, None)
    newest = slots[-1]
    runs = now - newest <= max(routine.catch_up, ON_TIME)
    missed = slots[:-1] if runs else slots
    return Due(
        run=newest if runs else None,
        missed=len(missed) + missed_beyond,
        first_missed=missed[0] if missed else None,
        last_missed=missed[-1] if missed else None,
        last=newest,
    )
