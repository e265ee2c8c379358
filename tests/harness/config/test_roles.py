"""Role files (roles/*.md): their front matter and body parsed, defaults given, and every wrong
field named with the file and the fix."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.config.roles import BUILTIN_TOOLS, load_roles, parse_role
from harness.errors import RoleError
from tests.harness.config.roles_support import MINIMAL, role_error

FULL = """\
---
name: api-dev
displayName: API Developer
category: worker
cwd: ../api
model: claude-sonnet-4-5
tools: [Read, Edit, Bash]
permissionMode: acceptEdits
maxTurns: 30
maxBudgetUsd: 2.5
---
# API developer

You change the API.
"""


def test_minimal_role_gets_defaults(tmp_path: Path) -> None:
    role = parse_role(MINIMAL, source="roles/developer.md", base_dir=tmp_path)

    assert role.name == "developer"
    assert role.display_name == "developer"
    assert role.category == "worker"
    assert role.prompt == "You write code."
    assert role.source == "roles/developer.md"
    assert role.cwd is None
    assert role.model is None
    assert role.tools is None
    assert role.permission_mode == "default"
    assert role.max_turns is None
    assert role.max_budget_usd is None


def test_full_role_reads_every_field_and_resolves_cwd(tmp_path: Path) -> None:
    role = parse_role(FULL, source="roles/api-dev.md", base_dir=tmp_path / "hub")

    assert role.display_name == "API Developer"
    assert role.cwd == tmp_path / "api"
    assert role.cwd.is_absolute()
    assert role.model == "claude-sonnet-4-5"
    assert role.tools == ("Read", "Edit", "Bash")
    assert role.permission_mode == "acceptEdits"
    assert role.max_turns == 30
    assert role.max_budget_usd == 2.5
    assert role.prompt == "# API developer\n\nYou change the API."


def test_empty_tools_list_means_no_builtin_tools(tmp_path: Path) -> None:
    text = MINIMAL.replace("category: worker", "category: worker\ntools: []")

    role = parse_role(text, source="x", base_dir=tmp_path)

    assert role.tools == ()


def test_file_without_front_matter_is_rejected_with_an_example(tmp_path: Path) -> None:
    error = role_error("You write code.\n", tmp_path)

    assert error.file == "roles/x.md"
    assert error.field == "(front matter)"
    assert "---" in error.fix


def test_unclosed_front_matter_is_rejected(tmp_path: Path) -> None:
    error = role_error("---\nname: x\ncategory: worker\nYou write code.\n", tmp_path)

    assert "not closed" in error.problem


def test_unknown_field_lists_the_known_fields(tmp_path: Path) -> None:
    error = role_error(
        MINIMAL.replace("category: worker", "category: worker\nmaxTurn: 3"), tmp_path
    )

    assert error.field == "maxTurn"
    assert "did you mean 'maxTurns'?" in error.fix
    assert "permissionMode" in error.fix


def test_missing_name_is_rejected(tmp_path: Path) -> None:
    error = role_error("---\ncategory: worker\n---\nbody\n", tmp_path)

    assert error.field == "name"
    assert error.problem == "missing"


def test_missing_category_is_rejected(tmp_path: Path) -> None:
    error = role_error("---\nname: x\n---\nbody\n", tmp_path)

    assert error.field == "category"
    assert "conversational" in error.fix


def test_empty_body_is_rejected(tmp_path: Path) -> None:
    error = role_error("---\nname: x\ncategory: worker\n---\n\n   \n", tmp_path)

    assert error.field == "(body)"


def test_unknown_permission_mode_lists_the_modes(tmp_path: Path) -> None:
    error = role_error(MINIMAL.replace("worker", "worker\npermissionMode: yolo"), tmp_path)

    assert error.field == "permissionMode"
    assert "bypassPermissions" in error.fix


def test_zero_max_turns_is_rejected(tmp_path: Path) -> None:
    error = role_error(MINIMAL.replace("worker", "worker\nmaxTurns: 0"), tmp_path)

    assert error.field == "maxTurns"
    assert "greater than 0" in error.problem


def test_fractional_max_turns_is_rejected(tmp_path: Path) -> None:
    error = role_error(MINIMAL.replace("worker", "worker\nmaxTurns: 2.5"), tmp_path)

    assert error.field == "maxTurns"


def test_tools_as_a_string_is_rejected(tmp_path: Path) -> None:
    error = role_error(MINIMAL.replace("worker", "worker\ntools: Read"), tmp_path)

    assert error.field == "tools"
    assert "list" in error.problem


def test_lowercase_tool_name_is_rejected(tmp_path: Path) -> None:
    error = role_error(MINIMAL.replace("worker", "worker\ntools: [Read, grep]"), tmp_path)

    assert error.field == "tools[1]"


def test_mcp_tool_in_tools_points_to_the_mcp_config(tmp_path: Path) -> None:
    error = role_error(
        MINIMAL.replace("worker", "worker\ntools: [mcp__harness__draft_agent]"), tmp_path
    )

    assert "config.yaml" in error.problem


def test_front_matter_yaml_error_is_a_role_error(tmp_path: Path) -> None:
    error = role_error("---\nname: [x\n---\nbody\n", tmp_path)

    assert "YAML syntax error" in error.problem


def test_front_matter_yaml_error_is_one_line_with_the_file_line_and_column(
    tmp_path: Path,
) -> None:
    error = role_error("---\nname: developer\ndescription: writes: code\n---\nbody\n", tmp_path)

    first_line, fix_line = str(error).splitlines()
    # Line 3 of the file: the front matter starts below the opening `---`.
    assert first_line == (
        f"{error.file}:3:20: YAML syntax error: mapping values are not allowed here"
    )
    assert "<unicode string>" not in str(error)
    assert fix_line.startswith("  fix: fix the front matter at the line and column shown")


def test_load_roles_keys_roles_by_name(tmp_path: Path) -> None:
    (tmp_path / "developer.md").write_text(MINIMAL, encoding="utf-8")
    (tmp_path / "reviewer.md").write_text(
        MINIMAL.replace("developer", "reviewer"), encoding="utf-8"
    )
    (tmp_path / "notes.txt").write_text("not a role", encoding="utf-8")

    roles = load_roles(tmp_path, base_dir=tmp_path)

    assert sorted(roles) == ["developer", "reviewer"]
    assert roles["reviewer"].source == str(tmp_path / "reviewer.md")


def test_load_roles_rejects_a_name_that_differs_from_the_file_name(tmp_path: Path) -> None:
    (tmp_path / "dev.md").write_text(MINIMAL, encoding="utf-8")

    with pytest.raises(RoleError) as caught:
        load_roles(tmp_path, base_dir=tmp_path)

    assert caught.value.file == str(tmp_path / "dev.md")
    assert caught.value.field == "name"
    assert "name: dev" in caught.value.fix


def test_load_roles_missing_folder_says_how_to_fix(tmp_path: Path) -> None:
    with pytest.raises(RoleError) as caught:
        load_roles(tmp_path / "roles", base_dir=tmp_path)

    assert "does not exist" in caught.value.problem
    assert "roles:" in caught.value.fix


def test_load_roles_folder_without_md_files_is_rejected(tmp_path: Path) -> None:
    with pytest.raises(RoleError) as caught:
        load_roles(tmp_path, base_dir=tmp_path)

    assert "no role files" in caught.value.problem


def test_load_roles_rejects_a_cwd_that_does_not_exist(tmp_path: Path) -> None:
    (tmp_path / "developer.md").write_text(
        MINIMAL.replace("worker", "worker\ncwd: missing"), encoding="utf-8"
    )

    with pytest.raises(RoleError) as caught:
        load_roles(tmp_path, base_dir=tmp_path)

    assert caught.value.field == "cwd"


def test_misspelled_builtin_tool_is_rejected_with_the_closest_name(tmp_path: Path) -> None:
    error = role_error(MINIMAL.replace("worker", "worker\ntools: [Read, Bsh]"), tmp_path)

    assert error.field == "tools[1]"
    assert error.problem == "'Bsh' is not a built-in tool that Claude Code 2.1.330 offers agents"
    assert error.fix.startswith("did you mean 'Bash'? ")
    assert "WebFetch" in error.fix


def test_lowercase_tool_name_suggests_the_capitalised_one(tmp_path: Path) -> None:
    error = role_error(MINIMAL.replace("worker", "worker\ntools: [Read, grep]"), tmp_path)

    assert error.fix.startswith("did you mean 'Grep'? ")


def test_a_tool_the_cli_knows_but_does_not_offer_agents_is_rejected(tmp_path: Path) -> None:
    error = role_error(MINIMAL.replace("worker", "worker\ntools: [TodoWrite]"), tmp_path)

    assert error.field == "tools[0]"
    assert "'TodoWrite' is not a built-in tool" in error.problem


def test_structured_output_in_tools_says_the_harness_adds_it(tmp_path: Path) -> None:
    error = role_error(MINIMAL.replace("worker", "worker\ntools: [StructuredOutput]"), tmp_path)

    assert "added by the harness" in error.problem
    assert error.fix == "remove it"


def test_a_tool_listed_twice_names_the_second_one(tmp_path: Path) -> None:
    error = role_error(MINIMAL.replace("worker", "worker\ntools: [Read, Grep, Read]"), tmp_path)

    assert error.field == "tools[2]"
    assert error.problem == "'Read' is listed twice"


def test_every_builtin_tool_name_is_accepted(tmp_path: Path) -> None:
    text = MINIMAL.replace("worker", f"worker\ntools: [{', '.join(BUILTIN_TOOLS)}]")

    assert parse_role(text, source="x", base_dir=tmp_path).tools == BUILTIN_TOOLS


def test_a_quoted_number_of_turns_is_rejected(tmp_path: Path) -> None:
    error = role_error(MINIMAL.replace("worker", "worker\nmaxTurns: '20'"), tmp_path)

    assert error.field == "maxTurns"
    assert error.problem == "expected an integer, found a string ('20')"
    assert "`maxTurns: 20`" in error.fix


def test_a_misspelled_permission_mode_suggests_the_right_one(tmp_path: Path) -> None:
    error = role_error(MINIMAL.replace("worker", "worker\npermissionMode: acceptedits"), tmp_path)

    assert error.problem.startswith("'acceptedits' is not one of: default, acceptEdits")
    assert error.fix.startswith("did you mean 'acceptEdits'? ")


def test_an_invalid_name_shows_the_rule_and_an_example(tmp_path: Path) -> None:
    error = role_error("---\nname: Dev Ops\ncategory: worker\n---\nbody\n", tmp_path)

    assert error.field == "name"
    assert "'Dev Ops'" in error.problem
    assert "`name: developer`" in error.fix
    assert "lowercase letters" in error.fix


def test_a_category_that_is_not_a_string_names_the_field(tmp_path: Path) -> None:
    error = role_error("---\nname: x\ncategory: 7\n---\nbody\n", tmp_path)

    assert error.field == "category"
    assert error.problem == "expected a non-empty string, found an integer (7)"


def test_load_roles_rejects_a_roles_path_that_is_a_file(tmp_path: Path) -> None:
    (tmp_path / "roles").write_text("", encoding="utf-8")

    with pytest.raises(RoleError) as caught:
        load_roles(tmp_path / "roles", base_dir=tmp_path)

    assert "is a file, not a folder" in caught.value.problem
