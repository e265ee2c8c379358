"""Strict validation of tool inputs (seed 004): types, lengths, formats, unknown fields.

One declaration per tool gives both the JSON schema the model sees and the checks, so the
two cannot drift apart. Pure.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from harness.errors import ToolError

Kind = Literal["string", "integer", "number", "strings"]


@dataclass(frozen=True)
class Field:
    kind: Kind
    description: str
    required: bool = True
    max_length: int | None = None
    pattern: str | None = None
    # What a valid value looks like, for the error's suggestion.
    example: str = ""
    minimum: float | None = None
    maximum: float | None = None
    # For "strings" (a list of strings): how many items at most (max_length is per item).
    max_items: int | None = None


def json_schema(fields: Mapping[str, Field]) -> dict[str, Any]:
    properties: dict[str, Any] = {}
    for name, f in fields.items():
        if f.kind == "strings":
            item: dict[str, Any] = {"type": "string", "minLength": 1}
            if f.max_length is not None:
                item["maxLength"] = f.max_length
            properties[name] = {
                "type": "array",
                "description": f.description,
                "items": item,
                **({"maxItems": f.max_items} if f.max_items is not None else {}),
            }
            continue
        prop: dict[str, Any] = {"type": f.kind, "description": f.description}
        if f.kind == "string":
            prop["minLength"] = 1
        if f.max_length is not None:
            prop["maxLength"] = f.max_length
        if f.pattern is not None:
            prop["pattern"] = f.pattern
        if f.minimum is not None:
            prop["minimum"] = f.minimum
        if f.maximum is not None:
            prop["maximum"] = f.maximum
        properties[name] = prop
    return {
        "type": "object",
        "properties": properties,
        "required": [n for n, f in fields.items() if f.required],
        "additionalProperties": False,
    }


def validate(tool: str, args: Mapping[str, Any], fields: Mapping[str, Field]) -> dict[str, Any]:
    """The checked arguments, or a ToolError(INVALID_INPUT) naming the field and the fix."""
    unknown = sorted(set(args) - set(fields))
    if unknown:
        known = ", ".join(fields) or "none"
        raise ToolError(
            "INVALID_INPUT",
            f"{tool}: unknown field(s) {', '.join(unknown)}",
            f"{tool} takes these fields: {known}",
        )
    checked: dict[str, Any] = {}
    for name, f in fields.items():
        if name not in args or args[name] is None:
            if f.required:
                raise ToolError(
                    "INVALID_INPUT",
                    f"{tool}: missing required field {name!r}",
                    f"pass {name}: {f.description}" + (f" (e.g. {f.example})" if f.example else ""),
                )
            continue
        checked[name] = _check(tool, name, args[name], f)
    return checked


def _check(tool: str, name: str, value: Any, f: Field) -> Any:
    def fail(problem: str, hint: str) -> ToolError:
        return ToolError("INVALID_INPUT", f"{tool}: field {name!r} {problem}", hint)

    if f.kind == "strings":
        if not isinstance(value, list):
            raise fail(f"must be a list of strings, got {type(value).__name__}", "pass a list")
        if f.max_items is not None and len(value) > f.max_items:
            raise fail(f"has {len(value)} items, more than {f.max_items}", "pass fewer items")
        item = dataclasses.replace(f, kind="string")
        return [_check(tool, f"{name}[{n}]", v, item) for n, v in enumerate(value)]
    if f.kind == "string":
        if not isinstance(value, str):
            raise fail(f"must be a string, got {type(value).__name__}", f"pass {name} as text")
        if not value.strip():
            raise fail("is empty", f"pass {name}: {f.description}")
        if f.max_length is not None and len(value) > f.max_length:
            raise fail(
                f"is {len(value)} characters, more than the {f.max_length} allowed",
                f"shorten {name}, or put the details in the task instead",
            )
        if f.pattern is not None and not re.fullmatch(f.pattern, value):
            raise fail(
                f"has an invalid format: {value[:80]!r}",
                f"{name} must match {f.pattern}" + (f", e.g. {f.example}" if f.example else ""),
            )
        return value
    is_int = isinstance(value, int) and not isinstance(value, bool)
    if f.kind == "integer" and not is_int:
        raise fail(f"must be a whole number, got {value!r}", f"pass {name} as an integer")
    if f.kind == "number" and not (is_int or isinstance(value, float)):
        raise fail(f"must be a number, got {value!r}", f"pass {name} as a number")
    if (f.minimum is not None and value < f.minimum) or (
        f.maximum is not None and value > f.maximum
    ):
        raise fail(
            f"is {value}, outside {f.minimum}..{f.maximum}",
            f"pass {name} between {f.minimum} and {f.maximum}",
        )
    return value
