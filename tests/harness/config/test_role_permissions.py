"""What a role may do: its category known to config.yaml (harness.project.check_categories) and
its allow: and deny: permission rules."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from harness.config.roles import Role, parse_role
from harness.config.settings import parse_config
from harness.errors import RoleError
from harness.permissions.rules import parse_rule
from harness.project import check_categories
from harness.tools.access import tools_for_category
from tests.harness.config.roles_support import MINIMAL, role_error

# --- a role's category must be known to config.yaml (harness.project.check_categories) ---


def categories_error(mcp: dict[str, object], category: str, tmp_path: Path) -> RoleError:
    config = parse_config({"mcp": mcp}, file=tmp_path / "config.yaml")
    role = parse_role(
        MINIMAL.replace("worker", category), source="roles/developer.md", base_dir=tmp_path
    )
    with pytest.raises(RoleError) as caught:
        check_categories(config, {role.name: role})
    return caught.value


def test_a_misspelled_category_names_the_role_file_and_suggests_the_known_one(
    tmp_path: Path,
) -> None:
    error = categories_error({}, "conversatonal", tmp_path)

    assert error.file == "roles/developer.md"
    assert error.field == "category"
    assert error.problem == (
        "unknown category 'conversatonal'; known categories: conversational, worker"
    )
    assert error.fix.startswith("did you mean 'conversational'? ")
    assert "mcp.fullAccessCategories" in error.fix


def test_a_category_spelled_differently_in_config_names_both_places(tmp_path: Path) -> None:
    error = categories_error({"fullAccessCategories": ["coordinater"]}, "coordinator", tmp_path)

    assert error.field == "category"
    assert "did you mean 'coordinater'?" in error.fix
    assert "mcp.fullAccessCategories[0]" in error.fix
    assert "whichever of the two is misspelled" in error.fix


def test_a_category_far_from_every_known_one_says_where_to_declare_it(tmp_path: Path) -> None:
    error = categories_error({}, "zzz", tmp_path)

    assert "did you mean" not in error.fix
    assert f"{tmp_path / 'config.yaml'} under mcp.fullAccessCategories" in error.fix


@pytest.mark.parametrize(
    ("mcp", "offered", "withheld"),
    [
        ({"fullAccessCategories": ["lead"]}, "draft_agent", None),
        ({"allow": {"lead": ["mcp__harness__await_agent"]}}, "await_agent", "draft_agent"),
        ({"fullAccessCategories": ["lead"], "deny": {"lead": ["*kill_agent"]}}, "draft_agent",
         "kill_agent"),
    ],
)  # fmt: skip
def test_a_category_named_in_the_mcp_settings_is_known_and_its_tools_follow_them(
    mcp: dict[str, object], offered: str, withheld: str | None, tmp_path: Path
) -> None:
    config = parse_config({"mcp": mcp}, file=tmp_path / "config.yaml")
    role = parse_role(MINIMAL.replace("worker", "lead"), source="x.md", base_dir=tmp_path)

    check_categories(config, {role.name: role})  # a role has the category: accepted

    tools = tools_for_category(role.category, config.mcp)
    assert offered in tools
    assert withheld is None or withheld not in tools


# --- allow: and deny: permission rules ---------------------------------------------------


def test_allow_and_deny_rules_are_parsed_at_load(tmp_path: Path) -> None:
    text = MINIMAL.replace(
        "worker",
        "worker\nallow:\n  - Bash(pytest:*)\n  - Edit(src/**)\ndeny: ['Bash(git push:*)']",
    )

    role = parse_role(text, source="x", base_dir=tmp_path)

    assert role.allow == (parse_rule("Bash(pytest:*)"), parse_rule("Edit(src/**)"))
    assert role.deny == (parse_rule("Bash(git push:*)"),)


def test_a_role_without_rules_allows_and_denies_nothing(tmp_path: Path) -> None:
    role = parse_role(MINIMAL, source="x", base_dir=tmp_path)

    assert (role.allow, role.deny) == ((), ())


@pytest.mark.parametrize(
    ("rules", "field", "problem", "fix"),
    [
        (
            "allow: [Bash(ls:*), Edit(src/**), bash(ls)]",
            "allow[2]",
            "'bash(ls)': 'bash' is not a tool name",
            "did you mean 'Bash'? e.g. `Bash(pytest:*)`",
        ),
        (
            "allow: [Bash(pytest:*]",
            "allow[0]",
            "'Bash(pytest:*': unbalanced parentheses",
            "`Bash(pytest:*)`",
        ),
        ("deny: ['Bash()']", "deny[0]", "empty specifier", "write `Bash` for every use"),
        (
            "deny: [WebFetch(example.com)]",
            "deny[0]",
            "`domain:<host>`",
            "`WebFetch(domain:example.com)`",
        ),
        (
            "allow: [Bsh]",
            "allow[0]",
            "'Bsh' names 'Bsh', not a built-in tool that Claude Code 2.1.330 offers agents",
            "did you mean 'Bash'? ",
        ),
        (
            "allow: [MultiEdit(src/**)]",
            "allow[0]",
            "not a built-in tool",
            "`Bash(pytest:*)`",
        ),
        ("allow: [3]", "allow[0]", "expected a string, found an integer (3)", "`allow: ["),
        ("allow: Bash(ls)", "allow", "expected a list of strings", "`allow: [Bash(pytest:*)"),
        ("deny: [Bash(ls), Bash(ls)]", "deny[1]", "'Bash(ls)' is listed twice", "remove"),
        (
            "allow: [Read, Bash(ls)]\ndeny: [Bash(ls)]",
            "allow[1]",
            "'Bash(ls)' is in both allow and deny; deny wins",
            "remove it from one",
        ),
    ],
)
def test_an_invalid_rule_names_the_role_file_and_the_item(
    rules: str, field: str, problem: str, fix: str, tmp_path: Path
) -> None:
    error = role_error(MINIMAL.replace("worker", f"worker\n{rules}"), tmp_path)

    assert error.file == "roles/x.md"
    assert error.field == field
    assert problem in error.problem
    assert fix in error.fix


def test_mcp_rules_are_accepted_in_a_role(tmp_path: Path) -> None:
    text = MINIMAL.replace("worker", "worker\nallow: [mcp__github__*, mcp__harness__list_tasks]")

    role = parse_role(text, source="x", base_dir=tmp_path)

    assert [rule.tool for rule in role.allow] == ["mcp__github__*", "mcp__harness__list_tasks"]


def test_a_role_with_rules_survives_a_json_round_trip(tmp_path: Path) -> None:
    text = MINIMAL.replace("worker", "worker\nallow: [Bash(pytest:*)]\ndeny: [Bash(sudo:*)]")
    role = parse_role(text, source="x", base_dir=tmp_path)

    data = json.loads(json.dumps(dataclasses.asdict(role)))

    assert Role(**data) == role
    assert Role(**{**data, "allow": ["Bash(pytest:*)"]}).allow == role.allow
