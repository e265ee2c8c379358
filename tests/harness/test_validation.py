import pytest

from harness.errors import ToolError
from harness.validation import Field, json_schema, validate

FIELDS = {
    "name": Field("string", "a name", max_length=5, pattern=r"[a-z]+", example="abc"),
    "count": Field("integer", "how many", required=False, minimum=1, maximum=3),
}


def invalid(args: dict[str, object]) -> ToolError:
    with pytest.raises(ToolError) as caught:
        validate("tool", args, FIELDS)
    assert caught.value.code == "INVALID_INPUT"
    assert caught.value.suggestion
    return caught.value


def test_valid_input_passes_through() -> None:
    assert validate("tool", {"name": "abc", "count": 2}, FIELDS) == {"name": "abc", "count": 2}


def test_missing_required_field_names_it_and_gives_an_example() -> None:
    error = invalid({})
    assert "'name'" in error.message
    assert "abc" in error.suggestion


def test_unknown_field_lists_the_known_fields() -> None:
    error = invalid({"name": "abc", "nmae": "x"})
    assert "nmae" in error.message
    assert "name, count" in error.suggestion


@pytest.mark.parametrize(
    ("args", "problem"),
    [
        ({"name": 3}, "must be a string"),
        ({"name": "   "}, "is empty"),
        ({"name": "abcdefg"}, "more than the 5 allowed"),
        ({"name": "AB"}, "invalid format"),
        ({"name": "abc", "count": "2"}, "whole number"),
        ({"name": "abc", "count": True}, "whole number"),
        ({"name": "abc", "count": 9}, "outside"),
    ],
)
def test_bad_values_are_refused_with_the_problem(args: dict[str, object], problem: str) -> None:
    assert problem in invalid(args).message


def test_schema_marks_required_fields_and_forbids_extras() -> None:
    schema = json_schema(FIELDS)
    assert schema["required"] == ["name"]
    assert schema["additionalProperties"] is False
    assert schema["properties"]["name"]["maxLength"] == 5
