from typing import Annotated

import pytest
from pydantic import Field

from harness.errors import ToolError
from harness.tools.validation import Text, ToolInput, input_schema, validate


class Sample(ToolInput):
    name: Annotated[
        Text, Field(max_length=5, pattern=r"^[a-z]+$", description="a name", examples=["abc"])
    ]
    count: Annotated[int, Field(ge=1, le=3, description="how many")] | None = None
    tags: Annotated[list[Annotated[Text, Field(max_length=4)]], Field(max_length=2)] | None = None


def invalid(args: dict[str, object]) -> ToolError:
    with pytest.raises(ToolError) as caught:
        validate("tool", args, Sample)
    assert caught.value.code == "INVALID_INPUT"
    assert caught.value.suggestion
    return caught.value


def test_valid_input_passes_through() -> None:
    checked = validate("tool", {"name": "abc", "count": 2}, Sample)
    assert (checked.name, checked.count, checked.tags) == ("abc", 2, None)


def test_missing_required_field_names_it_and_gives_an_example() -> None:
    error = invalid({})
    assert error.message == "tool: name: missing"
    assert "abc" in error.suggestion


def test_unknown_field_lists_the_known_fields_and_the_closest_one() -> None:
    error = invalid({"name": "abc", "nmae": "x"})
    assert "unknown key 'nmae'" in error.message
    assert "name, count, tags" in error.suggestion
    assert "did you mean 'name'?" in error.suggestion


def test_every_problem_is_named_when_there_are_several() -> None:
    error = invalid({"name": 3, "count": 0})
    assert "name: expected a non-empty string" in error.message
    assert "also count: must be >= 1, found 0" in error.message


@pytest.mark.parametrize(
    ("args", "problem"),
    [
        ({"name": 3}, "name: expected a non-empty string, found an integer (3)"),
        ({"name": "   "}, "found a string ('   ')"),
        ({"name": ""}, "name: expected a non-empty string, found an empty string"),
        ({"name": "abcdefg"}, "must be at most 5 characters long, found 7"),
        ({"name": "AB"}, "('AB') does not match the required pattern ^[a-z]+$"),
        ({"name": "abc", "count": "2"}, "count: expected an integer, found a string ('2')"),
        ({"name": "abc", "count": True}, "count: expected an integer, found a boolean (true)"),
        ({"name": "abc", "count": 9}, "count: must be <= 3, found 9"),
        ({"name": "abc", "tags": "x"}, "tags: expected a list"),
        ({"name": "abc", "tags": ["a", "b", "c"]}, "expected at most 2 item(s), found 3"),
        ({"name": "abc", "tags": ["a", "toolong"]}, "tags[1]: must be at most 4 characters"),
    ],
)
def test_bad_values_are_refused_with_the_problem(args: dict[str, object], problem: str) -> None:
    assert problem in invalid(args).message


def test_schema_marks_required_fields_forbids_extras_and_keeps_limits() -> None:
    schema = input_schema(Sample)
    assert schema["required"] == ["name"]
    assert schema["additionalProperties"] is False
    assert schema["properties"]["name"]["maxLength"] == 5
    assert schema["properties"]["name"]["examples"] == ["abc"]
    # Optional fields read as their plain type, not as anyOf with null.
    assert schema["properties"]["count"]["type"] == "integer"
    assert schema["properties"]["tags"]["items"]["maxLength"] == 4
    assert "title" not in schema and "title" not in schema["properties"]["name"]
