"""config.yaml's ``spares:``: agents started ahead per role, a count for the workspace a new
task gets by default, or a count per named repository (``spares: {reviewer: {api: 1}}``)."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from harness.problems import Invalid, NonEmptyStr, describe

SpareCount = Annotated[int, Field(ge=0, le=8)]
Spares = dict[NonEmptyStr, SpareCount | dict[str, SpareCount]]


def check_spare_counts(value: object) -> object:
    """Each role's count, or its repositories' counts, said plainly (pydantic would report
    the two shapes a value may take as two errors); ``value`` as it was."""
    if not isinstance(value, dict):
        return value  # pydantic says what it expected
    for role, counts in value.items():
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
