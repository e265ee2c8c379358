"""config.yaml's mapping parsed into settings: every section, and a wrong key, type, value,
Slack id or rule named by its field with the fix, all problems at once."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.cli.scaffold import DEFAULTS
from harness.config.settings import (
    McpSettings,
    RuntimeSettings,
    SlackSettings,
    load_config,
    parse_config,
)
from harness.errors import ConfigError
from tests.harness.config.settings_support import parse_error, workspaces_error

FULL_CONFIG = """\
roles: my-roles
tasks: data/tasks
defaultRole: coder
routing:
  - pattern: '^(plan|analyze)\\b'
    role: planner
  - pattern: '^review\\b'
    role: reviewer
context: {budgetChars: 5000}
askHuman: {timeoutSeconds: 60}
mcp:
  toolTimeoutMs: 1000
  fullAccessCategories: [conversational, lead]
  maxDepth: 0
  maxConcurrentAgents: 2
  taskBudgetUsd: 1.5
  allow: {worker: ["mcp__harness__list_*"]}
  deny: {lead: ["mcp__harness__kill_agent"]}
metadata:
  git_branch: {command: "git rev-parse --abbrev-ref HEAD", description: "Branch",
               timeoutSeconds: 2, include_in_list: true}
  uptime: {command: uptime}
slack: {allowedUsers: [U1], allowedChannels: [C1, C2], admins: [U9]}
"""


def test_empty_mapping_gives_defaults_relative_to_the_config_folder(tmp_path: Path) -> None:
    config = parse_config({}, file=tmp_path / "config.yaml")

    assert config.file == tmp_path / "config.yaml"
    assert config.base_dir == tmp_path
    assert config.roles_dir == tmp_path / "roles"
    assert config.tasks_dir == tmp_path / ".agents" / "tasks"
    assert config.default_role == "developer"
    assert config.rules == ()
    assert config.context_budget_chars == 24_000
    assert config.ask_timeout_seconds == 900.0
    # The file's defaults are the settings' own: a Config built by hand behaves the same.
    assert config.mcp == McpSettings()
    assert config.slack == SlackSettings()
    assert config.runtime == RuntimeSettings()
    assert config.model_api_retries == 10
    assert config.metadata == ()
    assert config.slack.allowed_users == ()


def test_full_file_loads_every_section(tmp_path: Path) -> None:
    file = tmp_path / "config.yaml"
    file.write_text(FULL_CONFIG, encoding="utf-8")

    config = load_config(file)

    assert config.roles_dir == tmp_path / "my-roles"
    assert config.tasks_dir == tmp_path / "data" / "tasks"
    assert config.default_role == "coder"
    assert [rule.role for rule in config.rules] == ["planner", "reviewer"]
    assert config.context_budget_chars == 5000
    assert config.ask_timeout_seconds == 60.0
    assert config.mcp.tool_timeout_ms == 1000
    assert config.mcp.full_access_categories == ("conversational", "lead")
    assert config.mcp.max_depth == 0
    assert config.mcp.max_concurrent_agents == 2
    assert config.mcp.task_budget_usd == 1.5
    assert config.mcp.allow == {"worker": ("mcp__harness__list_*",)}
    assert config.mcp.deny == {"lead": ("mcp__harness__kill_agent",)}
    branch, uptime = config.metadata
    assert branch.name == "git_branch"
    assert branch.timeout_seconds == 2.0
    assert branch.include_in_list is True
    assert uptime.command == "uptime"
    assert uptime.include_in_list is False
    assert config.slack.allowed_channels == ("C1", "C2")
    assert config.slack.admins == ("U9",)


def test_routing_patterns_are_compiled_case_insensitively(tmp_path: Path) -> None:
    config = parse_config(
        {"routing": [{"pattern": "^review\\b", "role": "reviewer"}]}, file=tmp_path / "c.yaml"
    )

    assert config.rules[0].pattern.search("REVIEW this")
    assert not config.rules[0].pattern.search("reviewers")


def test_relative_path_going_up_is_normalised(tmp_path: Path) -> None:
    config = parse_config({"roles": "../shared/roles"}, file=tmp_path / "app" / "config.yaml")

    assert config.roles_dir == tmp_path / "shared" / "roles"


def test_invalid_regex_names_the_pattern_and_the_re_error(tmp_path: Path) -> None:
    error = parse_error(
        {
            "routing": [
                {"pattern": "^ok", "role": "a"},
                {"pattern": "^(unclosed", "role": "b"},
            ]
        },
        tmp_path,
    )

    assert error.field == "routing[1].pattern"
    assert "'^(unclosed'" in error.problem
    assert "missing ), unterminated subpattern" in error.problem
    assert error.file == str(tmp_path / "config.yaml")
    assert error.fix


def test_unknown_top_level_key_lists_known_keys_and_suggests_the_spelling(
    tmp_path: Path,
) -> None:
    error = parse_error({"defaultrole": "developer"}, tmp_path)

    assert error.field == "defaultrole"
    assert "unknown key" in error.problem
    assert "did you mean 'defaultRole'?" in error.fix
    assert "routing" in error.fix and "mcp" in error.fix


def test_unknown_key_inside_a_section_names_its_path(tmp_path: Path) -> None:
    error = parse_error({"mcp": {"maxDepht": 2}}, tmp_path)

    assert error.field == "mcp.maxDepht"
    assert "maxDepth" in error.fix


def test_wrong_type_says_expected_and_found(tmp_path: Path) -> None:
    error = parse_error({"mcp": {"maxDepth": "three"}}, tmp_path)

    assert error.field == "mcp.maxDepth"
    assert "expected an integer" in error.problem
    assert "'three'" in error.problem


def test_boolean_is_not_accepted_as_a_number(tmp_path: Path) -> None:
    error = parse_error({"context": {"budgetChars": True}}, tmp_path)

    assert error.field == "context.budgetChars"
    assert "boolean" in error.problem


def test_negative_budget_is_rejected_with_the_limit(tmp_path: Path) -> None:
    error = parse_error({"mcp": {"taskBudgetUsd": -1}}, tmp_path)

    assert error.field == "mcp.taskBudgetUsd"
    assert "greater than 0" in error.problem


def test_zero_concurrent_agents_is_rejected(tmp_path: Path) -> None:
    error = parse_error({"mcp": {"maxConcurrentAgents": 0}}, tmp_path)

    assert error.field == "mcp.maxConcurrentAgents"
    assert ">= 1" in error.problem


def test_routing_rule_without_role_is_rejected(tmp_path: Path) -> None:
    error = parse_error({"routing": [{"pattern": "^x"}]}, tmp_path)

    assert error.field == "routing[0].role"
    assert error.problem == "missing"


def test_routing_that_is_not_a_list_is_rejected(tmp_path: Path) -> None:
    error = parse_error({"routing": {"pattern": "^x", "role": "a"}}, tmp_path)

    assert error.field == "routing"
    assert "expected a list" in error.problem


def test_allow_with_a_string_instead_of_a_list_is_rejected(tmp_path: Path) -> None:
    error = parse_error({"mcp": {"allow": {"worker": "mcp__harness__*"}}}, tmp_path)

    assert error.field == "mcp.allow.worker"
    assert "expected a list of strings" in error.problem


def test_metadata_field_without_command_is_rejected(tmp_path: Path) -> None:
    error = parse_error({"metadata": {"branch": {"description": "x"}}}, tmp_path)

    assert error.field == "metadata.branch.command"


def test_slack_list_item_of_wrong_type_names_its_index(tmp_path: Path) -> None:
    error = parse_error({"slack": {"admins": ["U1", 42]}}, tmp_path)

    assert error.field == "slack.admins[1]"
    assert "expected a string" in error.problem


@pytest.mark.parametrize("name", ["@alice", "alice@example.com", "alice", "u012abc", "C012ABC"])
def test_a_slack_user_that_is_not_a_member_id_is_refused_with_how_to_find_one(
    tmp_path: Path, name: str
) -> None:
    error = parse_error({"slack": {"allowedUsers": [name]}}, tmp_path)

    assert error.file == str(tmp_path / "config.yaml")
    assert error.field == "slack.allowedUsers[0]"
    assert error.problem == f"{name!r} is not a Slack user id"
    assert "Copy member ID" in error.fix


def test_an_admin_that_is_an_email_names_its_index(tmp_path: Path) -> None:
    error = parse_error({"slack": {"admins": ["U012ABC", "alice@example.com"]}}, tmp_path)

    assert error.field == "slack.admins[1]"
    assert "profile > ⋮ > Copy member ID" in error.fix.replace(" (More)", "")


@pytest.mark.parametrize("name", ["#general", "general", "U012ABC"])
def test_a_slack_channel_that_is_not_a_channel_id_is_refused(tmp_path: Path, name: str) -> None:
    error = parse_error({"slack": {"allowedChannels": ["C012ABC", name]}}, tmp_path)

    assert error.field == "slack.allowedChannels[1]"
    assert error.problem == f"{name!r} is not a Slack channel id"
    assert "`C012ABCDEF`" in error.fix


def test_a_workspaces_channel_that_is_a_name_is_refused(tmp_path: Path) -> None:
    error = workspaces_error(
        {"channels": {"general": "web"}, "repositories": {"web": {"path": "a"}}}, tmp_path
    )

    assert error.field.startswith("workspaces.channels")
    assert error.problem == "'general' is not a Slack channel id"


def test_slack_ids_of_every_kind_are_accepted(tmp_path: Path) -> None:
    config = parse_config(
        {
            "slack": {
                "allowedUsers": ["U012ABCDEF", "W0123ABC"],
                "allowedChannels": ["C012ABCDEF", "G0123", "D0456"],
                "admins": ["U9"],
            },
            "workspaces": {"channels": {"G0123": "web"}, "repositories": {"web": {"path": "a"}}},
        },
        file=tmp_path / "config.yaml",
    )

    assert config.slack.allowed_users == ("U012ABCDEF", "W0123ABC")
    assert config.slack.allowed_channels == ("C012ABCDEF", "G0123", "D0456")
    assert config.workspaces.channels == {"G0123": "web"}


def test_the_shipped_config_says_what_admins_may_do() -> None:
    text = (DEFAULTS / "config.yaml").read_text(encoding="utf-8")

    assert "change settings" not in text
    assert "stop any agent" in text


def test_error_text_contains_file_field_problem_and_fix(tmp_path: Path) -> None:
    error = parse_error({"askHuman": {"timeoutSeconds": "soon"}}, tmp_path)

    text = str(error)
    assert text.startswith(f"{tmp_path / 'config.yaml'}: askHuman.timeoutSeconds: expected")
    assert "fix:" in text


def test_a_quoted_number_is_not_an_integer(tmp_path: Path) -> None:
    error = parse_error({"mcp": {"maxDepth": "3"}}, tmp_path)

    assert error.field == "mcp.maxDepth"
    assert error.problem == "expected an integer, found a string ('3')"
    assert "`maxDepth: 3`" in error.fix


def test_true_is_not_a_number_of_seconds(tmp_path: Path) -> None:
    error = parse_error({"askHuman": {"timeoutSeconds": True}}, tmp_path)

    assert error.field == "askHuman.timeoutSeconds"
    assert error.problem == "expected a number, found a boolean (true)"


def test_a_whole_number_is_accepted_where_a_number_is_expected(tmp_path: Path) -> None:
    config = parse_config({"mcp": {"taskBudgetUsd": 2}}, file=tmp_path / "config.yaml")

    assert config.mcp.task_budget_usd == 2.0


def test_every_problem_in_the_file_is_reported_at_once(tmp_path: Path) -> None:
    error = parse_error({"mcp": {"maxDepth": "x", "maxDepht": 1}, "slack": {"admin": []}}, tmp_path)

    assert error.field == "mcp.maxDepth"
    assert len(error.also) == 2
    assert error.also[0].startswith("mcp.maxDepht: unknown key 'maxDepht'")
    assert "did you mean 'admins'?" in error.also[1]
    assert "\n  also: slack.admin: unknown key 'admin'" in str(error)


def test_both_spellings_of_include_in_list_are_rejected_together(tmp_path: Path) -> None:
    error = parse_error(
        {"metadata": {"b": {"command": "x", "include_in_list": True, "includeInList": True}}},
        tmp_path,
    )

    assert error.field == "metadata.b.includeInList"
    assert "include_in_list" in error.fix


def test_camel_case_include_in_list_is_accepted(tmp_path: Path) -> None:
    config = parse_config(
        {"metadata": {"b": {"command": "x", "includeInList": True}}}, file=tmp_path / "c.yaml"
    )

    assert config.metadata[0].include_in_list is True


def test_a_blank_role_in_a_routing_rule_is_rejected_with_an_example(tmp_path: Path) -> None:
    error = parse_error({"routing": [{"pattern": "^x", "role": "  "}]}, tmp_path)

    assert error.field == "routing[0].role"
    assert error.problem == "expected a non-empty string, found a string ('  ')"
    assert "`role: reviewer`" in error.fix


def test_a_section_that_is_not_a_mapping_lists_its_keys(tmp_path: Path) -> None:
    error = parse_error({"mcp": 3}, tmp_path)

    assert error.field == "mcp"
    assert error.problem == "expected a mapping, found an integer (3)"
    assert "maxConcurrentAgents" in error.fix


def test_tasks_pointing_at_an_existing_file_is_rejected_at_load(tmp_path: Path) -> None:
    (tmp_path / "tasks.json").write_text("{}", encoding="utf-8")
    file = tmp_path / "config.yaml"
    file.write_text("tasks: tasks.json\n", encoding="utf-8")

    with pytest.raises(ConfigError) as caught:
        load_config(file)

    assert caught.value.file == str(file)
    assert caught.value.field == "tasks"
    assert caught.value.problem == f"{tmp_path / 'tasks.json'} is a file, not a folder"
    assert "tasks: .agents/tasks" in caught.value.fix


def test_parse_does_not_look_at_the_file_system_for_tasks(tmp_path: Path) -> None:
    (tmp_path / "tasks.json").write_text("{}", encoding="utf-8")

    config = parse_config({"tasks": "tasks.json"}, file=tmp_path / "config.yaml")

    assert config.tasks_dir == tmp_path / "tasks.json"


def test_tasks_folder_that_does_not_exist_yet_is_fine(tmp_path: Path) -> None:
    file = tmp_path / "config.yaml"
    file.write_text("tasks: not/yet\n", encoding="utf-8")

    assert load_config(file).tasks_dir == tmp_path / "not" / "yet"


# --- task retention (pruneTasksAfterDays, applied by `harness prune-tasks`) ---------------


def test_tasks_are_kept_forever_unless_a_retention_is_set(tmp_path: Path) -> None:
    assert parse_config({}, file=tmp_path / "config.yaml").prune_tasks_after_days is None
    assert load_config(DEFAULTS / "config.yaml").prune_tasks_after_days is None
    config = parse_config({"pruneTasksAfterDays": 90}, file=tmp_path / "config.yaml")
    assert config.prune_tasks_after_days == 90.0


def test_a_retention_of_zero_days_names_the_field_and_an_example(tmp_path: Path) -> None:
    error = parse_error({"pruneTasksAfterDays": 0}, tmp_path)

    assert error.field == "pruneTasksAfterDays"
    assert "90" in error.fix


def test_too_many_automatic_fixes_are_refused_with_the_range(tmp_path: Path) -> None:
    error = parse_error({"github": {"autoFixTries": 9}}, tmp_path)

    assert error.field == "github.autoFixTries"
    assert "5" in error.problem
