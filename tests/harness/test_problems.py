from __future__ import annotations

from typing import Literal

import pydantic
import pytest
from pydantic import Field

from harness.problems import (
    TOP_LEVEL,
    Invalid,
    NonEmptyStr,
    Problem,
    closest,
    describe,
    problems,
    render,
)


class Strict(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(extra="forbid", strict=True)


class Limits(Strict):
    max_depth: int = Field(3, alias="maxDepth", ge=0, examples=[3], description="0: never")
    budget_usd: float | None = Field(None, alias="budgetUsd", gt=0, le=100, examples=[2.5])
    flag: bool = Field(
        False, validation_alias=pydantic.AliasChoices("include_in_list", "includeInList")
    )


class Rule(Strict):
    pattern: str = Field(
        pattern=r"^[a-z]+$", examples=["review"], description="lowercase letters only"
    )
    role: NonEmptyStr = Field(examples=["reviewer"])


def _unique(names: list[str]) -> list[str]:
    for index, name in enumerate(names):
        if name in names[:index]:
            raise Invalid(f"{name!r} is listed twice", fix="remove the duplicate", at=(index,))
    return names


class Settings(Strict):
    mcp: Limits = Field(default_factory=lambda: Limits.model_validate({}))
    routing: list[Rule] = Field([], examples=[[{"pattern": "review", "role": "reviewer"}]])
    tools: list[str] = Field([], max_length=2, examples=[["Read", "Grep"]])
    mode: Literal["default", "acceptEdits"] = Field("default", alias="permissionMode")
    title: str = Field("x", min_length=2, max_length=5, examples=["Dev"])
    globs: dict[NonEmptyStr, list[NonEmptyStr]] = Field({}, examples=[{"worker": ["a*"]}])
    names: list[str] = Field([], examples=[["a", "b"]])

    @pydantic.field_validator("names")
    @classmethod
    def _names_are_unique(cls, names: list[str]) -> list[str]:
        return _unique(names)


def problems_of(data: object) -> list[Problem]:
    with pytest.raises(pydantic.ValidationError) as caught:
        Settings.model_validate(data)
    return problems(caught.value, Settings)


def only_problem(data: object) -> Problem:
    [problem] = problems_of(data)
    return problem


def test_missing_field_names_its_path_and_the_declared_example() -> None:
    problem = only_problem({"routing": [{"pattern": "a", "role": "b"}, {"pattern": "review"}]})

    assert problem.path == "routing[1].role"
    assert problem.problem == "missing"
    assert "`role: reviewer`" in problem.fix


def test_unknown_key_suggests_the_closest_alias_and_lists_the_known_keys() -> None:
    problem = only_problem({"mcp": {"maxDepht": 2}})

    assert problem.path == "mcp.maxDepht"
    assert problem.problem == "unknown key 'maxDepht'"
    assert problem.fix.startswith("did you mean 'maxDepth'? ")
    assert "budgetUsd" in problem.fix and "include_in_list" in problem.fix


def test_unknown_key_far_from_every_alias_gets_no_suggestion() -> None:
    problem = only_problem({"zzz": 1})

    assert problem.path == "zzz"
    assert "did you mean" not in problem.fix
    assert "permissionMode" in problem.fix


def test_two_spellings_of_one_field_ask_to_keep_one() -> None:
    problem = only_problem({"mcp": {"include_in_list": True, "includeInList": False}})

    assert problem.path == "mcp.includeInList"
    assert "'include_in_list'" in problem.problem
    assert problem.fix == "keep only one of: include_in_list, includeInList"


def test_wrong_type_says_what_was_expected_and_what_was_found() -> None:
    problem = only_problem({"mcp": {"maxDepth": "ten"}})

    assert problem.path == "mcp.maxDepth"
    assert problem.problem == "expected an integer, found a string ('ten')"
    assert problem.fix == "make it an integer, e.g. `maxDepth: 3` (0: never)"


def test_a_boolean_is_not_a_number_in_strict_models() -> None:
    problem = only_problem({"mcp": {"budgetUsd": True}})

    assert problem.problem == "expected a number, found a boolean (true)"


def test_a_list_where_a_mapping_belongs_lists_the_keys_of_the_section() -> None:
    problem = only_problem({"mcp": [1, 2]})

    assert problem.problem == "expected a mapping, found a list of 2 item(s)"
    assert "maxDepth" in problem.fix


def test_a_list_item_of_the_wrong_type_names_its_index_and_the_item_type() -> None:
    problem = only_problem({"routing": ["review"]})

    assert problem.path == "routing[0]"
    assert problem.problem == "expected a mapping, found a string ('review')"
    assert "each item of `routing:`" in problem.fix and "pattern, role" in problem.fix


def test_a_mapping_value_of_the_wrong_type_names_the_key() -> None:
    problem = only_problem({"globs": {"worker": "a*"}})

    assert problem.path == "globs.worker"
    assert problem.problem == "expected a list of strings, found a string ('a*')"
    assert "`globs: {worker: [a*]}`" in problem.fix


def test_a_mapping_key_of_the_wrong_type_is_named_as_the_key() -> None:
    problem = only_problem({"globs": {7: ["a"]}})

    assert problem.path == "globs.7"
    assert problem.problem == "expected a non-empty string as the key, found an integer (7)"


def test_the_root_that_is_not_a_mapping_is_the_top_level() -> None:
    problem = only_problem(["a"])

    assert problem.path == TOP_LEVEL
    assert problem.problem == "expected a mapping, found a list of 1 item(s)"
    assert "routing" in problem.fix


def test_below_a_minimum_says_the_bound_and_the_value() -> None:
    problem = only_problem({"mcp": {"maxDepth": -1}})

    assert problem.problem == "must be >= 0, found -1"
    assert problem.fix.startswith("set it to 0 or more, e.g. `maxDepth: 3`")


def test_not_above_an_exclusive_minimum_says_greater_than() -> None:
    problem = only_problem({"mcp": {"budgetUsd": 0}})

    assert problem.problem == "must be greater than 0, found 0"


def test_above_a_maximum_says_the_bound() -> None:
    problem = only_problem({"mcp": {"budgetUsd": 500}})

    assert problem.path == "mcp.budgetUsd"
    assert problem.problem == "must be <= 100, found 500"


def test_string_length_limits_say_the_limit_and_what_was_found() -> None:
    long, short = only_problem({"title": "abcdefgh"}), only_problem({"title": "a"})

    assert long.problem == "must be at most 5 characters long, found 8"
    assert short.problem == "must be at least 2 character(s) long, found 1"
    assert "`title: Dev`" in long.fix


def test_too_many_list_items_says_the_limit_and_the_count() -> None:
    problem = only_problem({"tools": ["Read", "Grep", "Glob"]})

    assert problem.path == "tools"
    assert problem.problem == "expected at most 2 item(s), found 3"


def test_pattern_mismatch_shows_the_value_and_the_fields_description() -> None:
    problem = only_problem({"routing": [{"pattern": "Review!", "role": "reviewer"}]})

    assert problem.path == "routing[0].pattern"
    assert problem.problem.startswith("a string ('Review!') does not match the required pattern")
    assert "`pattern: review`" in problem.fix
    assert "lowercase letters only" in problem.fix


def test_a_value_outside_a_literal_lists_the_choices_and_suggests_one() -> None:
    problem = only_problem({"permissionMode": "acceptedits"})

    assert problem.path == "permissionMode"
    assert problem.problem == "'acceptedits' is not one of: default, acceptEdits"
    assert problem.fix.startswith("did you mean 'acceptEdits'? use one of: default, acceptEdits")


def test_a_blank_string_is_not_a_non_empty_string() -> None:
    problem = only_problem({"routing": [{"pattern": "a", "role": "   "}]})

    assert problem.path == "routing[0].role"
    assert problem.problem == "expected a non-empty string, found a string ('   ')"
    assert "`role: reviewer`" in problem.fix


def test_a_custom_validator_carries_its_own_text_and_points_at_the_item() -> None:
    problem = only_problem({"names": ["a", "b", "a"]})

    assert problem == Problem("names[2]", "'a' is listed twice", "remove the duplicate")


def test_every_error_becomes_a_problem_in_the_files_order() -> None:
    found = problems_of({"mcp": {"maxDepth": "x"}, "tools": "Read", "extra": 1})

    assert [problem.path for problem in found] == ["mcp.maxDepth", "tools", "extra"]


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (None, "null"),
        (True, "a boolean (true)"),
        (3, "an integer (3)"),
        (2.5, "a number (2.5)"),
        ("abc", "a string ('abc')"),
        ("", "an empty string"),
        ("x" * 50, f"a string ('{'x' * 37}...')"),
        (["a", "b"], "a list of 2 item(s)"),
        ({"a": 1}, "a mapping"),
    ],
)
def test_describe_says_the_type_and_a_short_preview(value: object, expected: str) -> None:
    assert describe(value) == expected


def test_render_quotes_only_what_yaml_would_misread() -> None:
    assert render(["Read", "Grep"]) == "[Read, Grep]"
    assert render("^review\\b") == "'^review\\b'"
    assert render("3") == "'3'"
    assert render({"worker": ["mcp__harness__list_*"], "on": True}) == (
        "{worker: [mcp__harness__list_*], on: true}"
    )


def test_closest_prefers_the_same_word_in_another_case() -> None:
    assert closest("grep", ["Glob", "Grep"]) == "Grep"
    assert closest("Bsh", ["Bash", "Read"]) == "Bash"
    assert closest("zzz", ["Bash", "Read"]) is None
