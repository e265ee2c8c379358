"""config.yaml's ``spares:``: agents started ahead per role, a count for the workspace a new
task gets by default, or a count per named repository (``spares: {reviewer: {api: 1}}``),
and beside the roles the caps on all idle spares together: ``maxIdle`` (how many) and
``maxMemoryMb`` (their resident memory). Role names are lowercase (``roles.py``), so these
camelCase keys cannot be a role's."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, cast

from pydantic import Field

from harness.problems import Invalid, NonEmptyStr, describe

SpareCount = Annotated[int, Field(ge=0, le=8)]
# A role's count, a role's counts per repository, or a cap (checked by ``check_spare_counts``).
Spares = dict[NonEmptyStr, int | dict[str, SpareCount]]

# The caps: key -> (least, most, what it is).
LIMITS = {
    "maxIdle": (0, 64, "idle spares in all (those for follow-ups too)"),
    "maxMemoryMb": (100, 1_000_000, "MB of resident memory that idle spares hold in all"),
}
DEFAULT_MAX_IDLE = 8
DEFAULT_MAX_MEMORY_MB = 2048


def check_spare_counts(value: object) -> object:
    """Each role's count, or its repositories' counts, and each cap, said plainly (pydantic
    would report the two shapes a value may take as two errors); ``value`` as it was."""
    if not isinstance(value, dict):
        return value  # pydantic says what it expected
    for role, counts in value.items():
        if role in LIMITS:
            _check_limit(role, counts)
            continue
        if isinstance(role, str) and role[:1].islower() and not role.islower():
            raise Invalid(
                f"unknown cap {role!r}", fix=f"the caps are {' and '.join(LIMITS)}", at=(role,)
            )
        each = counts.items() if isinstance(counts, dict) else [(None, counts)]
        for name, count in each:
            if isinstance(count, bool) or not isinstance(count, int) or not 0 <= count <= 8:
                shapes = "" if name else " or a mapping of repository names to counts"
                raise Invalid(
                    f"expected a count from 0 to 8{shapes}, found {describe(count)}",
                    fix=f"write `{role}: 1`, or `{role}: {{web: 1}}` to keep them in the "
                    "worktrees of repository `web`",
                    at=(role, name) if name else (role,),
                )
    return value


def _check_limit(key: str, value: object) -> None:
    least, most, what = LIMITS[key]
    if isinstance(value, bool) or not isinstance(value, int) or not least <= value <= most:
        raise Invalid(
            f"expected the most {what}, a whole number from {least} to {most}, "
            f"found {describe(value)}",
            fix=f"write `{key}: {DEFAULT_MAX_IDLE if key == 'maxIdle' else DEFAULT_MAX_MEMORY_MB}`",
            at=(key,),
        )


def role_counts(value: Mapping[str, object] | None) -> dict[str, int | dict[str, int]] | None:
    """The roles' counts of ``spares:`` (its caps left out); None when it names no role, so
    the default (one of the default role) holds, as when it is not written."""
    if value is None:
        return None
    counts = {k: v for k, v in value.items() if k not in LIMITS}
    if not counts and value:
        return None
    return cast(dict[str, int | dict[str, int]], counts)  # as ``check_spare_counts`` checked


def spare_limit(value: Mapping[str, object] | None, key: str, default: int) -> int:
    """A cap as written in ``spares:``, else its default."""
    found = (value or {}).get(key, default)
    assert isinstance(found, int)
    return found
