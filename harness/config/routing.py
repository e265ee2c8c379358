"""Message routing: which role answers a message (regex rules, first match wins)."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence

from harness.config.roles import Role
from harness.config.routing_schema import RoutingRule
from harness.config.settings import Config
from harness.errors import ConfigError

logger = logging.getLogger(__name__)


class Router:
    """Pure routing over compiled rules (patterns are compiled case-insensitively by config)."""

    def __init__(self, rules: Sequence[RoutingRule], default_role: str) -> None:
        self.rules: tuple[RoutingRule, ...] = tuple(rules)
        self.default_role = default_role

    @classmethod
    def from_config(cls, config: Config) -> Router:
        return cls(config.rules, config.default_role)

    def match(self, text: str) -> str | None:
        """The role of the first rule matching ``text``, or None.

        Leading whitespace is ignored so that ``^review`` still matches "  review this".
        """
        stripped = text.lstrip()
        for rule in self.rules:
            if rule.pattern.search(stripped):
                return rule.role
        return None

    def route(self, text: str, last_role: str | None = None) -> str:
        """Match, else keep the thread's last role (a follow-up), else the default role."""
        matched = self.match(text)
        if matched is not None:
            return matched
        return last_role if last_role else self.default_role


def validate_routing(config: Config, roles: Mapping[str, Role]) -> None:
    """Fail at start-up, not on the first message, when routing names a role that is missing."""
    known = ", ".join(sorted(roles)) or "(none)"
    fix = f"use one of the known roles ({known}) or add {config.roles_dir}/<name>.md"
    if config.default_role not in roles:
        raise ConfigError(
            str(config.file),
            "defaultRole",
            f"unknown role {config.default_role!r}; known roles: {known}",
            fix=fix,
        )
    for index, rule in enumerate(config.rules):
        if rule.role not in roles:
            raise ConfigError(
                str(config.file),
                f"routing[{index}].role",
                f"unknown role {rule.role!r} (pattern {rule.pattern.pattern!r}); "
                f"known roles: {known}",
                fix=fix,
            )
    for name in config.spares or {}:
        if name not in roles:
            raise ConfigError(str(config.file), f"spares.{name}", f"unknown role {name!r}; "
                              f"known roles: {known}", fix=fix)  # fmt: skip
