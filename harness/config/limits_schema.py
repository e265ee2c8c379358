"""config.yaml's ``limits:``: how much the agents of one person, one channel and one routine
may spend in a day and a month (UTC), with overrides for named people and channels; and the
settings they become (``harness/agents/spend_limits.py`` applies them)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

import pydantic
from pydantic import Field

from harness.config.section import Section
from harness.config.slack_ids import channel_id_problem, user_id_problem
from harness.problems import Invalid

Window = Literal["day", "month"]
WINDOWS: tuple[Window, ...] = ("day", "month")


class _Windows(Section):
    day: float | None = Field(None, gt=0, examples=[20], description="USD per UTC day")
    month: float | None = Field(None, gt=0, examples=[200], description="USD per UTC month")


def _empty() -> _Windows:
    return _Windows.model_validate({})


class LimitsSection(Section):
    per_person_usd: _Windows = Field(
        default_factory=_empty,
        alias="perPersonUsd",
        examples=[{"day": 20, "month": 200}],
        description="what the agents one person asked for may spend (drafted agents count "
        "to the task's requester)",
    )
    per_channel_usd: _Windows = Field(
        default_factory=_empty,
        alias="perChannelUsd",
        examples=[{"month": 500}],
        description="what the agents of one channel's tasks may spend; direct messages count "
        "to the person only",
    )
    per_routine_usd: _Windows = Field(
        default_factory=_empty,
        alias="perRoutineUsd",
        examples=[{"month": 100}],
        description="what the agents of one routine's tasks may spend",
    )
    overrides: dict[str, _Windows] = Field(
        {},
        examples=[{"U0123456789": {"month": 1000}, "C0123456789": {"month": 2000}}],
        description="a person's (user id) or a channel's (channel id) own limits, in place "
        "of the windows they name",
    )

    @pydantic.field_validator("overrides", mode="before")
    @classmethod
    def _ids(cls, value: object) -> object:
        for key in value if isinstance(value, dict) else ():
            text = str(key)
            if text.startswith("D"):
                raise Invalid(
                    f"{text!r} is a direct message: what is spent there counts to the person",
                    fix="override the person's limits with their user id (`U…`) instead",
                    at=(text,),
                )
            if user_id_problem(text) is not None and channel_id_problem(text) is not None:
                raise Invalid(
                    f"{text!r} is neither a Slack user id nor a channel id",
                    fix="write a member id (`U012ABCDEF`: the person's profile > ⋮ > Copy "
                    "member ID) or a channel id (`C012ABCDEF`: the channel's details, at the "
                    "bottom of the About tab)",
                    at=(text,),
                )
        return value


@dataclass(frozen=True)
class LimitWindows:
    """USD a payer may spend per UTC day and per UTC month; None: no limit."""

    day: float | None = None
    month: float | None = None

    def of(self, window: Window) -> float | None:
        return self.day if window == "day" else self.month

    def over(self, other: LimitWindows) -> LimitWindows:
        """These windows where set, else ``other``'s."""
        return LimitWindows(
            day=self.day if self.day is not None else other.day,
            month=self.month if self.month is not None else other.month,
        )


@dataclass(frozen=True)
class LimitSettings:
    per_person: LimitWindows = LimitWindows()
    per_channel: LimitWindows = LimitWindows()
    per_routine: LimitWindows = LimitWindows()
    # By Slack user or channel id: windows set here replace the defaults above.
    overrides: Mapping[str, LimitWindows] = field(default_factory=dict)

    @property
    def any(self) -> bool:
        windows = (self.per_person, self.per_channel, self.per_routine, *self.overrides.values())
        return any(w.day is not None or w.month is not None for w in windows)

    def person(self, user: str) -> LimitWindows:
        return self.overrides.get(user, LimitWindows()).over(self.per_person)

    def channel(self, channel: str) -> LimitWindows:
        return self.overrides.get(channel, LimitWindows()).over(self.per_channel)


def _windows(raw: _Windows) -> LimitWindows:
    return LimitWindows(day=raw.day, month=raw.month)


def limit_settings(raw: LimitsSection) -> LimitSettings:
    return LimitSettings(
        per_person=_windows(raw.per_person_usd),
        per_channel=_windows(raw.per_channel_usd),
        per_routine=_windows(raw.per_routine_usd),
        overrides={key: _windows(value) for key, value in raw.overrides.items()},
    )
