"""config.yaml's ``routing:``: regex rules naming the role that answers a message (first
match wins; ``routing.py`` applies them) and ``defaultRole`` when none matches."""

from __future__ import annotations

import re
from dataclasses import dataclass

import pydantic
from pydantic import Field

from harness.config.section import Section
from harness.problems import Invalid, NonEmptyStr


class RuleEntry(Section):
    pattern: NonEmptyStr = Field(
        examples=["^review\\b"],
        description="a Python regex, matched case-insensitively at the start of the message",
    )
    role: NonEmptyStr = Field(examples=["reviewer"], description="the role that answers")

    @pydantic.field_validator("pattern")
    @classmethod
    def _compiles(cls, value: str) -> str:
        try:
            re.compile(value, re.IGNORECASE)
        except re.error as exc:
            raise Invalid(
                f"invalid regular expression {value!r}: {exc}",
                fix="fix the regex (Python `re` syntax; in YAML single quotes keep backslashes "
                "as written)",
                with_example=True,
            ) from exc
        return value


@dataclass(frozen=True)
class RoutingRule:
    pattern: re.Pattern[str]
    role: str


def routing_rules(raw: list[RuleEntry]) -> tuple[RoutingRule, ...]:
    return tuple(
        RoutingRule(pattern=re.compile(rule.pattern, re.IGNORECASE), role=rule.role) for rule in raw
    )
