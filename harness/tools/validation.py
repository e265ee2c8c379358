"""Strict validation of tool inputs: one pydantic model per tool gives both the JSON schema
the model sees and the checks, so the two cannot drift apart. Errors name the field, what was
found and the fix. Pure.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from harness.errors import ToolError
from harness.problems import NonEmptyStr, problems


class ToolInput(BaseModel):
    """The base of every tool's input: unknown fields and loose types are errors."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


# A string that must say something: whitespace alone is refused like an empty string.
Text = Annotated[NonEmptyStr, Field(min_length=1)]

T = TypeVar("T", bound=ToolInput)


def input_schema(model: type[ToolInput]) -> dict[str, Any]:
    """The JSON schema offered to the model: pydantic's, without titles and with optional
    fields written as their plain type (a model reads ``string`` more easily than anyOf)."""
    schema = model.model_json_schema(by_alias=True)
    schema.pop("title", None)
    for prop in schema.get("properties", {}).values():
        prop.pop("title", None)
        options = prop.pop("anyOf", None)
        if options is not None:
            prop.pop("default", None)
            for option in options:
                if option.get("type") != "null":
                    prop.update(option)
    return schema


def validate(tool: str, args: Mapping[str, Any], model: type[T]) -> T:
    """The checked input, or a ToolError(INVALID_INPUT) naming the field, what was found and
    the fix (every problem, when there are several)."""
    try:
        return model.model_validate(dict(args))
    except ValidationError as exc:
        found = problems(exc, model)
        first, rest = found[0], found[1:]
        also = "".join(f"; also {p.path}: {p.problem}" for p in rest)
        raise ToolError(
            "INVALID_INPUT", f"{tool}: {first.path}: {first.problem}{also}", first.fix
        ) from exc
