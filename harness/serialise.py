"""One JSON form for the harness's frozen dataclasses: task.json, the messages between the
harness and its workers, the agent spec.

A dataclass is its own schema. Its fields, in order, are the JSON object's keys, in camelCase
(``agent_id`` is ``agentId``); a tuple is an array, a nested dataclass an object, a ``Path`` a
string. Adding a field to a dataclass is the whole change: it is written and read back with
nothing else to edit. Reading is strict on types (a string where a number belongs is an error
naming the field) and lenient where documents of earlier versions must keep loading: unknown
keys are ignored, a missing key or a ``null`` takes the field's default, snake_case keys read
as well as camelCase ones, and an integer is accepted where a float belongs.

A document that does not read raises :class:`DecodeError` (a ``ValueError``), whose problems
name each bad field by its path as written (``dispatches[0].status``), what was found there and
the fix.
"""

from __future__ import annotations

import dataclasses
import json
import types
from collections.abc import Mapping
from typing import (
    Annotated,
    Any,
    Literal,
    TypeVar,
    Union,
    cast,
    get_args,
    get_origin,
    get_type_hints,
)

import pydantic
from pydantic.alias_generators import to_camel
from pydantic_core import InitErrorDetails, PydanticUseDefault, SchemaValidator, core_schema

from harness.errors import HarnessError
from harness.problems import TOP_LEVEL, Problem, problems

__all__ = [
    "CONFIG",
    "DecodeError",
    "dump_json",
    "from_json",
    "load_json",
    "schema",
    "to_json",
]

T = TypeVar("T")

CONFIG = pydantic.ConfigDict(
    alias_generator=to_camel,
    validate_by_alias=True,
    validate_by_name=True,
    serialize_by_alias=True,
    strict=True,
    extra="ignore",
)


class DecodeError(HarnessError, ValueError):
    """A JSON document that does not read as its type. ``problems`` name each bad field by
    its path as written; ``error`` is pydantic's own account, for callers that word it again."""

    def __init__(self, cls: type, error: pydantic.ValidationError) -> None:
        self.error = _model_like(error)
        self.problems = _worded(self.error, cls)
        shown = [f"{problem.path}: {problem.problem}" for problem in self.problems[:3]]
        if len(self.problems) > 3:
            shown.append(f"and {len(self.problems) - 3} more")
        super().__init__(
            f"not a valid {cls.__name__}: {'; '.join(shown)}", fix=self.problems[0].fix
        )


def to_json(value: object) -> dict[str, Any]:
    """``value`` (a dataclass) as a JSON object, its keys in field order."""
    data = _codec(type(value)).adapter.dump_python(value, mode="json", by_alias=True)
    return cast(dict[str, Any], data)


def dump_json(value: object) -> bytes:
    """``value`` (a dataclass) as compact JSON, UTF-8."""
    return _codec(type(value)).adapter.dump_json(value, by_alias=True)


def load_json(cls: type[T], data: bytes | str, *, given: Mapping[str, Any] | None = None) -> T:
    """The ``cls`` in the JSON document ``data``; raises DecodeError.

    ``given`` sets top-level fields (by field name; strings, numbers or booleans) whatever the
    document says of them, or when it says nothing: e.g. an identity its place decides."""
    try:
        value = _codec(cls).reader.validate_json(data)
    except pydantic.ValidationError as exc:
        if not given:
            raise DecodeError(cls, exc) from None
        # Perhaps only a given field is missing or wrong: read again with it set.
        try:
            raw = json.loads(data)
        except ValueError:
            raise DecodeError(cls, exc) from None
        return from_json(cls, raw, given=given)
    return dataclasses.replace(value, **given) if given else cast(T, value)


def from_json(cls: type[T], data: Any, *, given: Mapping[str, Any] | None = None) -> T:
    """The ``cls`` in ``data``, a parsed JSON document; raises DecodeError. ``given`` as in
    :func:`load_json`."""
    if given and isinstance(data, dict):
        data = {key: value for key, value in data.items() if key not in given}
        data.update((to_camel(name), value) for name, value in given.items())
    try:
        # Validating JSON text, not Python objects: strict JSON reads arrays into tuples and
        # strings into paths, where strict Python validation refuses both.
        value = _codec(cls).reader.validate_json(json.dumps(data, ensure_ascii=False))
    except pydantic.ValidationError as exc:
        raise DecodeError(cls, exc) from None
    return cast(T, value)


# ---------------------------------------------------------------- the codec of a type


@dataclasses.dataclass(frozen=True)
class _Codec:
    adapter: pydantic.TypeAdapter[Any]  # writes
    reader: SchemaValidator  # reads: the adapter's schema, with nulls read as defaults


_CODECS: dict[type, _Codec] = {}


def _codec(cls: type) -> _Codec:
    """The codec of ``cls``, made once."""
    codec = _CODECS.get(cls)
    if codec is None:
        codec = _CODECS[cls] = _make_codec(cls)
    return codec


def _make_codec(cls: type) -> _Codec:
    # A stdlib dataclass takes its pydantic config from this attribute (TypeAdapter refuses a
    # config for a dataclass); dataclasses nested in it without one of their own use it too.
    if dataclasses.is_dataclass(cls) and "__pydantic_config__" not in vars(cls):
        setattr(cls, "__pydantic_config__", CONFIG)  # noqa: B010 -- mypy knows no such attribute
    adapter: pydantic.TypeAdapter[Any] = pydantic.TypeAdapter(cls)
    return _Codec(adapter, SchemaValidator(_null_is_default(adapter.core_schema)))


def _null_is_default(node: Any) -> Any:
    """The core schema ``node`` in which a null given for a field whose default is not None
    takes that default (``prompt: null`` reads as ``prompt: str = ""``): earlier versions wrote
    nulls for what is now a default. The field's own type is still checked in JSON mode."""
    if isinstance(node, list):
        return [_null_is_default(item) for item in node]
    if not isinstance(node, dict):
        return node
    # A field's default value is data, not schema: left as it is.
    node = {
        key: value if key in ("default", "metadata") else _null_is_default(value)
        for key, value in node.items()
    }
    if node.get("type") == "default" and (
        "default_factory" in node or node.get("default") is not None
    ):
        nullable = core_schema.nullable_schema(node["schema"])
        node["schema"] = core_schema.no_info_after_validator_function(_use_default, nullable)
    return node


def _use_default(value: Any) -> Any:
    if value is None:
        raise PydanticUseDefault()
    return value


# ---------------------------------------------------------------- problems, worded


_SCHEMAS: dict[type, type[pydantic.BaseModel]] = {}


def schema(cls: type) -> type[pydantic.BaseModel]:
    """A pydantic model of the same shape as the dataclass ``cls`` (the same keys and types,
    nested dataclasses as models): ``harness.problems`` words errors by a model's fields."""
    model = _SCHEMAS.get(cls)
    if model is None:
        model = _SCHEMAS[cls] = _make_schema(cls)
    return model


def _make_schema(cls: type) -> type[pydantic.BaseModel]:
    hints = get_type_hints(cls, include_extras=True)
    fields: dict[str, Any] = {}
    for field in dataclasses.fields(cls):
        if field.default is not dataclasses.MISSING:
            default: Any = field.default
        elif field.default_factory is not dataclasses.MISSING:
            default = pydantic.Field(default_factory=field.default_factory)
        else:
            default = ...
        fields[field.name] = (_modelled(hints[field.name]), default)
    model: type[pydantic.BaseModel] = pydantic.create_model(
        cls.__name__, __config__=CONFIG, **fields
    )
    return model


def _modelled(hint: Any) -> Any:
    """``hint`` with each dataclass in it replaced by its model."""
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        return schema(hint)
    origin, args = get_origin(hint), get_args(hint)
    if origin is None or origin is Literal or not args:
        return hint
    if origin is Annotated:
        return Annotated[(_modelled(args[0]), *hint.__metadata__)]
    inner = tuple(arg if arg is Ellipsis else _modelled(arg) for arg in args)
    if origin in (Union, types.UnionType):
        return Union[inner]  # noqa: UP007 -- built from a tuple of types
    return origin[inner]


def _worded(error: pydantic.ValidationError, cls: type) -> list[Problem]:
    details = error.errors(include_url=False)
    if details and details[0]["type"] == "json_invalid":
        # Not JSON at all: there is no field to name, only where the parser stopped.
        where = details[0].get("ctx", {}).get("error", details[0]["msg"])
        return [Problem(TOP_LEVEL, f"not valid JSON ({where})", "repair the JSON")]
    return problems(error, schema(cls))


def _model_like(error: pydantic.ValidationError) -> pydantic.ValidationError:
    """``error`` with a dataclass's "not an object" reported as a model's (``model_type``),
    which ``harness.problems`` words: the same errors otherwise."""
    details = error.errors()
    if not any(detail["type"] == "dataclass_type" for detail in details):
        return error
    return pydantic.ValidationError.from_exception_data(
        error.title,
        [
            InitErrorDetails(
                type="model_type" if detail["type"] == "dataclass_type" else detail["type"],
                loc=detail["loc"],
                input=detail["input"],
                ctx=detail.get("ctx", {}),
            )
            for detail in details
        ],
    )
