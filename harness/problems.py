"""Turning a pydantic ``ValidationError`` into problems a person (or a model) can act on.

Used for every input the harness validates with pydantic: config.yaml, role front matter and
MCP tool input. Each :class:`Problem` names the field as the user wrote it (aliases, ``[i]``
for list items, ``.key`` for mapping keys), says what is wrong including what was found, and
says how to fix it. Fixes come from the field's own metadata: ``Field(description=...,
examples=[...])`` declares each field's example once, and every message about that field
reuses it.

Custom validators raise :class:`Invalid` to carry their own problem and fix text.
"""

from __future__ import annotations

import difflib
import logging
import types
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Annotated, Any, Literal, Union, get_args, get_origin

import pydantic
import yaml
from pydantic.fields import FieldInfo
from pydantic_core import ErrorDetails

logger = logging.getLogger(__name__)

TOP_LEVEL = "(top level)"


@dataclass(frozen=True)
class Problem:
    path: str  # "routing[1].pattern", "mcp.maxDepth", "tools[2]"; TOP_LEVEL for the root
    problem: str  # what is wrong, including what was found
    fix: str  # what to do, with the field's example where it declares one


class Invalid(ValueError):  # noqa: N818 -- reads as `raise Invalid(...)` inside validators
    """Raised by a custom validator, whose problem and fix text are used as written.

    ``at`` points below the validated value (e.g. the index of a duplicate list item), so the
    problem names the exact item. ``with_example`` appends the field's declared example to
    the fix.
    """

    def __init__(
        self,
        problem: str,
        *,
        fix: str,
        at: tuple[str | int, ...] = (),
        with_example: bool = False,
    ) -> None:
        super().__init__(problem)
        self.problem = problem
        self.fix = fix
        self.at = at
        self.with_example = with_example


def _not_blank(value: str) -> str:
    if not value.strip():
        raise Invalid(
            f"expected a non-empty string, found {describe(value)}",
            fix="make it a non-empty string",
            with_example=True,
        )
    return value


# A string with something in it: whitespace alone is as good as missing.
NonEmptyStr = Annotated[str, pydantic.AfterValidator(_not_blank)]


def describe(value: object) -> str:
    """How a value reads to a user: its type and a short preview."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return f"a boolean ({str(value).lower()})"
    if isinstance(value, int):
        return f"an integer ({value})"
    if isinstance(value, float):
        return f"a number ({value})"
    if isinstance(value, str):
        if not value:
            return "an empty string"
        preview = value if len(value) <= 40 else value[:37] + "..."
        return f"a string ({preview!r})"
    if isinstance(value, list | tuple):
        return f"a list of {len(value)} item(s)"
    if isinstance(value, Mapping):
        return "a mapping"
    return type(value).__name__


def closest(word: str, choices: Sequence[str]) -> str | None:
    """The choice ``word`` most likely misspells: same letters in another case, else the
    nearest by difflib's ratio; None when nothing is close."""
    for choice in choices:
        if choice.lower() == word.lower():
            return choice
    close = difflib.get_close_matches(word, choices, n=1)
    return close[0] if close else None


def did_you_mean(word: str, choices: Sequence[str]) -> str:
    """``"did you mean 'x'? "`` for the closest choice, else ``""``."""
    match = closest(word, choices)
    return f"did you mean {match!r}? " if match else ""


def problems(exc: pydantic.ValidationError, model: type[pydantic.BaseModel]) -> list[Problem]:
    """One Problem per pydantic error, in pydantic's order (the file's field order)."""
    return [_translate(error, model) for error in exc.errors()]


# --- where an error points: the model, field and expected type at its location -------------


@dataclass(frozen=True)
class _Spot:
    annotation: Any  # the expected type there (Annotated/Optional removed); None if unknown
    metadata: tuple[Any, ...]  # constraints and validators on that type
    field: FieldInfo | None  # the innermost field on the way there
    key: str  # that field's key as written
    kind: Literal["field", "item", "key"]  # the field itself, a value inside it, or a key


def _keys(info: FieldInfo, name: str) -> list[str]:
    alias = info.validation_alias
    if isinstance(alias, pydantic.AliasChoices):
        return [choice for choice in alias.choices if isinstance(choice, str)]
    if isinstance(alias, str):
        return [alias]
    return [info.alias or name]


def keys_of(model: type[pydantic.BaseModel]) -> list[str]:
    """Every key a model accepts, as written in the input."""
    return [key for name, info in model.model_fields.items() for key in _keys(info, name)]


def _unwrap(annotation: Any) -> tuple[Any, tuple[Any, ...]]:
    """Strip ``Annotated[...]`` (keeping its metadata) and ``| None``."""
    metadata: tuple[Any, ...] = ()
    while True:
        origin = get_origin(annotation)
        if origin is Annotated:
            annotation, *extra = get_args(annotation)
            metadata += tuple(extra)
        elif origin in (Union, types.UnionType):
            members = [a for a in get_args(annotation) if a is not type(None)]
            if len(members) != 1:
                return annotation, metadata
            annotation = members[0]
        else:
            return annotation, metadata


def _is_model(annotation: Any) -> bool:
    return isinstance(annotation, type) and issubclass(annotation, pydantic.BaseModel)


def _locate(model: type[pydantic.BaseModel], loc: Sequence[str | int]) -> _Spot:
    spot = _Spot(model, (), None, "", "field")
    parts = list(loc)
    while parts:
        part = parts.pop(0)
        annotation = spot.annotation
        origin = get_origin(annotation)
        if _is_model(annotation):
            found = next(
                (
                    (name, info)
                    for name, info in annotation.model_fields.items()
                    if str(part) in _keys(info, name)
                ),
                None,
            )
            if found is None:
                return _Spot(None, (), spot.field, spot.key, "field")
            inner, metadata = _unwrap(found[1].annotation)
            spot = _Spot(inner, metadata + tuple(found[1].metadata), found[1], str(part), "field")
        elif origin in (list, tuple, set, frozenset) and get_args(annotation):
            inner, metadata = _unwrap(get_args(annotation)[0])
            spot = _Spot(inner, metadata, spot.field, spot.key, "item")
        elif origin is dict and get_args(annotation):
            # pydantic reports a bad mapping key as (..., key, "[key]").
            on_key = bool(parts) and parts[0] == "[key]"
            if on_key:
                parts.pop(0)
            inner, metadata = _unwrap(get_args(annotation)[0 if on_key else 1])
            spot = _Spot(inner, metadata, spot.field, spot.key, "key" if on_key else "item")
        else:
            return _Spot(None, (), spot.field, spot.key, "field")
    return spot


def _path(loc: Sequence[str | int]) -> str:
    parts: list[str] = []
    for index, part in enumerate(loc):
        if part == "[key]":
            continue  # the key itself is the part before: the path already names it
        key_here = index + 1 < len(loc) and loc[index + 1] == "[key]"
        if isinstance(part, int) and not key_here:
            parts.append(f"[{part}]")
        else:
            parts.append(f".{part}" if parts else str(part))
    return "".join(parts) or TOP_LEVEL


# --- what was expected, and the field's example --------------------------------------------


_PLURALS: dict[Any, str] = {str: "strings", int: "integers", float: "numbers", bool: "booleans"}


def _expected(annotation: Any, metadata: tuple[Any, ...]) -> str:
    if annotation is str:
        non_empty = any(
            getattr(item, "func", None) is _not_blank or getattr(item, "min_length", 0)
            for item in metadata
        )
        return "a non-empty string" if non_empty else "a string"
    if annotation is bool:
        return "true or false"
    if annotation is int:
        return "an integer"
    if annotation is float:
        return "a number"
    if get_origin(annotation) is Literal:
        return "one of: " + ", ".join(str(choice) for choice in get_args(annotation))
    if get_origin(annotation) in (list, tuple, set, frozenset):
        args = get_args(annotation)
        item: Any = _unwrap(args[0])[0] if args else None
        plural = "mappings" if _is_model(item) else _PLURALS.get(item, "items")
        return f"a list of {plural}"
    if get_origin(annotation) is dict or _is_model(annotation):
        return "a mapping"
    return ""


def render(value: object) -> str:
    """A value as one line of YAML (which JSON readers read too): ``[Read, Glob]``."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, str):
        plain = (
            value == value.strip()
            and not any(mark in value for mark in ",[]{}#\\'\"")
            and _yaml_reads_back(value)
        )
        return value if plain else "'" + value.replace("'", "''") + "'"
    if isinstance(value, list | tuple):
        return "[" + ", ".join(render(item) for item in value) + "]"
    if isinstance(value, Mapping):
        return "{" + ", ".join(f"{key}: {render(item)}" for key, item in value.items()) + "}"
    return str(value)


def _yaml_reads_back(text: str) -> bool:
    try:
        return bool(text) and yaml.safe_load(text) == text
    except yaml.YAMLError:
        return False


def _example(spot: _Spot) -> str:
    """``e.g. `maxDepth: 3```, from the field's first declared example."""
    if spot.field is None or not spot.field.examples:
        return ""
    return f"e.g. `{spot.key}: {render(spot.field.examples[0])}`"


def _fix(action: str, spot: _Spot) -> str:
    """The action, the field's example and its description: what to do, and why."""
    fix = ", ".join(part for part in (action, _example(spot)) if part)
    description = spot.field.description if spot.field else None
    return f"{fix} ({description})" if description else fix


# --- one error, translated ------------------------------------------------------------------

# What each pydantic type error expected, when the field's own type does not say more.
_TYPE_ERRORS = {
    "string_type": "a string",
    "int_type": "an integer",
    "int_parsing": "an integer",
    "int_from_float": "an integer",
    "float_type": "a number",
    "float_parsing": "a number",
    "bool_type": "true or false",
    "bool_parsing": "true or false",
    "list_type": "a list",
    "tuple_type": "a list",
    "set_type": "a list",
    "dict_type": "a mapping",
    "model_type": "a mapping",
    "model_attributes_type": "a mapping",
    "none_required": "null",
}
# Numeric bounds: the ctx key holding the bound, the problem, the fix.
_BOUNDS = {
    "greater_than": ("gt", "must be greater than {}", "set it to a value above {}"),
    "greater_than_equal": ("ge", "must be >= {}", "set it to {} or more"),
    "less_than": ("lt", "must be less than {}", "set it to a value below {}"),
    "less_than_equal": ("le", "must be <= {}", "set it to {} or less"),
}
# Lengths: the ctx key holding the limit, the problem, the fix.
_LENGTHS = {
    "string_too_short": ("min_length", "must be at least {} character(s) long", "lengthen it"),
    "string_too_long": ("max_length", "must be at most {} characters long", "shorten it"),
    "too_short": ("min_length", "expected at least {} item(s)", "add items"),
    "too_long": ("max_length", "expected at most {} item(s)", "remove items"),
}


def _translate(error: ErrorDetails, model: type[pydantic.BaseModel]) -> Problem:
    kind = error["type"]
    loc = tuple(error["loc"])
    ctx: dict[str, Any] = dict(error.get("ctx") or {})
    found = error.get("input")

    if kind in ("extra_forbidden", "invalid_key"):
        return _unknown_key(loc, model)
    cause = ctx.get("error")
    if isinstance(cause, Invalid):
        example = _example(_locate(model, loc)) if cause.with_example else ""
        fix = f"{cause.fix}, {example}" if example else cause.fix
        return Problem(_path(loc + cause.at), cause.problem, fix)

    spot = _locate(model, loc)
    path = _path(loc)
    if kind == "missing":
        action = "add it" if _example(spot) else f"add `{spot.key or path}:` with a value"
        return Problem(path, "missing", _fix(action, spot))
    if kind in _TYPE_ERRORS:
        expected = _expected(spot.annotation, spot.metadata) or _TYPE_ERRORS[kind]
        as_key = " as the key" if spot.kind == "key" else ""
        problem = f"expected {expected}{as_key}, found {describe(found)}"
        if _is_model(spot.annotation):
            keys = ", ".join(keys_of(spot.annotation))
            where = {"field": f"`{spot.key}:`", "item": f"each item of `{spot.key}:`"}
            target = where[spot.kind] if spot.key else "it"
            fix = f"write {target} as `key: value` lines with keys from: {keys}"
            return Problem(path, problem, _fix(fix, spot) if spot.kind == "item" else fix)
        return Problem(path, problem, _fix(f"make it {expected}", spot))
    if kind in ("literal_error", "enum"):
        return _not_a_choice(path, spot, found, str(ctx.get("expected", "")))
    return _limit(kind, path, spot, found, ctx, error["msg"])


def _unknown_key(loc: tuple[str | int, ...], model: type[pydantic.BaseModel]) -> Problem:
    parent = _locate(model, loc[:-1])
    key = str(loc[-1])
    path = _path(loc[:-1]) + f".{key}" if loc[:-1] else key
    known = keys_of(parent.annotation) if _is_model(parent.annotation) else []
    listed = ", ".join(known)
    if key in known:
        # Two spellings of one setting (include_in_list / includeInList): keep one.
        same = [other for other in known if other != key and _same_field(parent, other, key)]
        return Problem(
            path,
            f"{key!r} sets the same field as {', '.join(map(repr, same)) or 'another key'}",
            f"keep only one of: {', '.join([*same, key])}",
        )
    if not known:
        return Problem(path, f"unknown key {key!r}", "leave it out: nothing is expected here")
    return Problem(
        path, f"unknown key {key!r}", f"{did_you_mean(key, known)}known keys here: {listed}"
    )


def _same_field(parent: _Spot, one: str, other: str) -> bool:
    fields: dict[str, FieldInfo] = parent.annotation.model_fields
    return any({one, other} <= set(_keys(info, name)) for name, info in fields.items())


def _not_a_choice(path: str, spot: _Spot, found: object, expected: str) -> Problem:
    choices = (
        [str(choice) for choice in get_args(spot.annotation)]
        if get_origin(spot.annotation) is Literal
        else []
    )
    listed = ", ".join(choices) or expected
    hint = did_you_mean(found, choices) if isinstance(found, str) else ""
    shown = repr(found) if isinstance(found, str) else describe(found)
    return Problem(
        path, f"{shown} is not one of: {listed}", _fix(f"{hint}use one of: {listed}", spot)
    )


def _number(value: object) -> str:
    """``0`` rather than ``0.0`` for a float bound on a whole number."""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def _limit(
    kind: str, path: str, spot: _Spot, found: object, ctx: dict[str, Any], message: str
) -> Problem:
    """Range, length and pattern errors, and anything else pydantic reports."""
    if kind in _BOUNDS:
        key, problem, fix = _BOUNDS[kind]
        bound = _number(ctx[key])
        return Problem(
            path, f"{problem.format(bound)}, found {found}", _fix(fix.format(bound), spot)
        )
    if kind in _LENGTHS:
        if isinstance(found, str):  # a length limit set beside a validator reports as items
            kind = "string_" + kind.removeprefix("string_")
        key, problem, fix = _LENGTHS[kind]
        size = len(found) if isinstance(found, str | list | tuple | Mapping) else "?"
        return Problem(path, f"{problem.format(ctx[key])}, found {size}", _fix(fix, spot))
    if kind == "string_pattern_mismatch":
        return Problem(
            path,
            f"{describe(found)} does not match the required pattern {ctx['pattern']}",
            _fix("change it to match", spot),
        )
    cause = ctx.get("error")
    text = str(cause) if isinstance(cause, Exception) else message
    logger.debug("untranslated pydantic error %s at %s", kind, path)
    return Problem(path, f"{text}, found {describe(found)}", _fix("correct the value", spot))
