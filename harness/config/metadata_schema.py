"""config.yaml's ``metadata:``: per-agent facts, each the output of a shell command run in
the agent's folder (its branch, say), shown with the agent."""

from __future__ import annotations

from dataclasses import dataclass

import pydantic
from pydantic import Field

from harness.config.section import Section
from harness.problems import NonEmptyStr


class MetadataEntry(Section):
    command: NonEmptyStr = Field(
        examples=["git rev-parse --abbrev-ref HEAD"],
        description="the shell command whose output is the value",
    )
    description: str | None = Field("", examples=["Current branch"])
    timeout_seconds: float = Field(5.0, alias="timeoutSeconds", gt=0, examples=[5])
    # Seed 001 spells the flag include_in_list; camelCase is accepted too, like everywhere else.
    include_in_list: bool = Field(
        False,
        validation_alias=pydantic.AliasChoices("include_in_list", "includeInList"),
        examples=[True],
    )


@dataclass(frozen=True)
class MetadataField:
    """A per-agent fact collected by running a shell command in the agent's cwd."""

    name: str
    command: str
    description: str = ""
    timeout_seconds: float = 5.0
    include_in_list: bool = False


def metadata_fields(raw: dict[str, MetadataEntry]) -> tuple[MetadataField, ...]:
    return tuple(
        MetadataField(
            name=name,
            command=entry.command,
            description=entry.description or "",
            timeout_seconds=entry.timeout_seconds,
            include_in_list=entry.include_in_list,
        )
        for name, entry in raw.items()
    )
