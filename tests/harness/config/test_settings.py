from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from harness.cli.scaffold import DEFAULTS
from harness.config.roles import Role
from harness.config.settings import (
    Config,
    McpSettings,
    RuntimeSettings,
    SlackSettings,
    load_config,
    parse_config,
)
from harness.errors import ConfigError
from harness.project import check_categories
from harness.tools.access import tools_for_category

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


def parse_error(mapping: dict[str, object], tmp_path: Path) -> ConfigError:
    with pytest.raises(ConfigError) as caught:
        parse_config(mapping, file=tmp_path / "config.yaml")
    return caught.value


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


def test_load_missing_file_names_the_file_and_how_to_point_to_one(tmp_path: Path) -> None:
    missing = tmp_path / "nope.yaml"

    with pytest.raises(ConfigError) as caught:
        load_config(missing)

    assert caught.value.file == str(missing)
    assert "not found" in caught.value.problem
    assert "HARNESS_CONFIG" in caught.value.fix


def test_load_a_folder_reads_the_config_yaml_in_it(tmp_path: Path) -> None:
    (tmp_path / "config.yaml").write_text("defaultRole: coder\n", encoding="utf-8")

    config = load_config(tmp_path)

    assert config.file == tmp_path / "config.yaml"
    assert config.default_role == "coder"


def test_load_a_folder_without_config_yaml_names_the_file_in_it(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as caught:
        load_config(tmp_path)

    assert caught.value.file == str(tmp_path / "config.yaml")
    assert caught.value.problem == "file not found"
    assert f"harness init {tmp_path}" in caught.value.fix


def test_load_yaml_syntax_error_names_the_file_and_line(tmp_path: Path) -> None:
    file = tmp_path / "config.yaml"
    file.write_text("routing:\n  - pattern: [unclosed\n", encoding="utf-8")

    with pytest.raises(ConfigError) as caught:
        load_config(file)

    assert caught.value.file == str(file)
    assert caught.value.problem == (
        "YAML syntax error: expected ',' or ']', but got '<stream end>' "
        "(while parsing a flow sequence started at 2:14)"
    )
    # One line, file:line:column first, then the fix; never PyYAML's `<unicode string>`.
    assert str(caught.value).splitlines() == [
        f"{file}:3:1: {caught.value.problem}",
        "  fix: fix the YAML at the line and column shown (indent with spaces, quote regexes)",
    ]


def test_load_yaml_error_points_at_the_offending_column(tmp_path: Path) -> None:
    file = tmp_path / "config.yaml"
    file.write_text("defaultRole: developer\nslack: allowedUsers: []\n", encoding="utf-8")

    with pytest.raises(ConfigError) as caught:
        load_config(file)

    assert str(caught.value).startswith(
        f"{file}:2:20: YAML syntax error: mapping values are not allowed here\n"
    )


def test_load_file_that_is_not_a_mapping_is_rejected(tmp_path: Path) -> None:
    file = tmp_path / "config.yaml"
    file.write_text("- just\n- a list\n", encoding="utf-8")

    with pytest.raises(ConfigError) as caught:
        load_config(file)

    assert caught.value.field == "(top level)"
    assert "expected a mapping" in caught.value.problem


def test_load_empty_file_means_all_defaults(tmp_path: Path) -> None:
    file = tmp_path / "config.yaml"
    file.write_text("# nothing set\n", encoding="utf-8")

    assert load_config(file).default_role == "developer"


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


# --- categories config.yaml names must be some role's (harness.project.check_categories) ---


def role(name: str, category: str) -> Role:
    return Role(name=name, display_name=name, category=category, prompt="p", source=f"{name}.md")


def check(mcp: dict[str, object], *roles: Role, tmp_path: Path) -> Config:
    config = parse_config({"mcp": mcp}, file=tmp_path / "config.yaml")
    check_categories(config, {r.name: r for r in roles})
    return config


def test_full_access_category_no_role_has_names_its_index_and_suggests_a_role_category(
    tmp_path: Path,
) -> None:
    with pytest.raises(ConfigError) as caught:
        check(
            {"fullAccessCategories": ["lead", "laed"]},
            role("pm", "lead"),
            role("dev", "worker"),
            tmp_path=tmp_path,
        )

    assert caught.value.file == str(tmp_path / "config.yaml")
    assert caught.value.field == "mcp.fullAccessCategories[1]"
    assert (
        caught.value.problem == "no role has category 'laed'; the roles' categories: lead, worker"
    )
    assert caught.value.fix.startswith("did you mean 'lead' (pm.md has `category: lead`)? ")


def test_full_access_category_without_a_close_role_category_says_how_to_fix(
    tmp_path: Path,
) -> None:
    with pytest.raises(ConfigError) as caught:
        check({"fullAccessCategories": ["lead"]}, role("dev", "worker"), tmp_path=tmp_path)

    assert caught.value.field == "mcp.fullAccessCategories[0]"
    assert "did you mean" not in caught.value.fix
    assert "`category: lead`" in caught.value.fix


def test_allow_rules_for_a_category_no_role_has_are_rejected(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as caught:
        check(
            {"allow": {"wrker": ["mcp__harness__show_agent"]}},
            role("a", "worker"),
            tmp_path=tmp_path,
        )

    assert caught.value.field == "mcp.allow.wrker"
    assert "did you mean 'worker'" in caught.value.fix


def test_the_default_conversational_category_needs_no_role(tmp_path: Path) -> None:
    config = check({}, role("dev", "worker"), tmp_path=tmp_path)

    # Accepted with no conversational role: the workers get the read-only tools only.
    assert "conversational" in config.mcp.full_access_categories
    assert "draft_agent" not in tools_for_category("worker", config.mcp)


def test_categories_every_role_uses_pass_and_give_their_tools(tmp_path: Path) -> None:
    config = check(
        {"fullAccessCategories": ["conversational", "lead"], "deny": {"lead": ["*kill_*"]}},
        role("pm", "lead"),
        role("analyst", "conversational"),
        tmp_path=tmp_path,
    )

    lead = tools_for_category("lead", config.mcp)
    assert "draft_agent" in lead and "kill_agent" not in lead
    assert "kill_agent" in tools_for_category("conversational", config.mcp)


# --- workspaces: -----------------------------------------------------------------------------


def workspaces_error(section: dict[str, object], tmp_path: Path) -> ConfigError:
    return parse_error({"workspaces": section}, tmp_path)


def test_no_workspaces_section_means_no_repositories_and_a_root_in_the_config_folder(
    tmp_path: Path,
) -> None:
    settings = parse_config({}, file=tmp_path / "config.yaml").workspaces

    assert settings.root == tmp_path / ".agents" / "workspaces"
    assert settings.repositories == {}
    assert settings.default is None
    assert settings.channels == {}
    assert settings.prune_after_days == 14.0


def test_workspaces_section_parses_with_paths_relative_to_the_config_folder(
    tmp_path: Path,
) -> None:
    settings = parse_config(
        {
            "workspaces": {
                "root": "work",
                "pruneAfterDays": 3,
                "default": "web",
                "channels": {"C0123ABCD": "api"},
                "repositories": {
                    "web": {"path": "../web", "baseBranch": "develop"},
                    "api": {"url": "https://git.example.com/api.git"},
                    "docs_2": {"url": "git@example.com:docs.git", "cache": "caches/docs"},
                },
            }
        },
        file=tmp_path / "app" / "config.yaml",
    ).workspaces

    assert settings.root == tmp_path / "app" / "work"
    assert settings.prune_after_days == 3.0
    assert settings.default == "web"
    assert settings.channels == {"C0123ABCD": "api"}
    web, api, docs = (settings.repositories[name] for name in ("web", "api", "docs_2"))
    assert (web.name, web.path, web.url, web.cache) == ("web", tmp_path / "web", None, None)
    assert web.base_branch == "develop"
    assert api.path is None
    assert api.url == "https://git.example.com/api.git"
    assert api.cache == tmp_path / "app" / "work" / ".repos" / "api"
    assert api.base_branch == "main"
    assert docs.cache == tmp_path / "app" / "caches" / "docs"


def shipped_example(section: str) -> object:
    """The commented-out example of ``section`` in the shipped config.yaml, parsed."""
    lines = (DEFAULTS / "config.yaml").read_text(encoding="utf-8").splitlines()
    start = lines.index(f"# {section}:")
    end = next((n for n in range(start + 1, len(lines)) if not lines[n].startswith("#  ")), None)
    example = [line.removeprefix("#").removeprefix(" ") for line in lines[start:end]]
    return yaml.safe_load("\n".join(example))


def test_the_shipped_example_of_workspaces_parses(tmp_path: Path) -> None:
    example = shipped_example("workspaces")
    assert isinstance(example, dict)
    settings = parse_config(example, file=tmp_path / "c.yaml")

    assert sorted(settings.workspaces.repositories) == ["api", "web"]
    assert load_config(DEFAULTS / "config.yaml").workspaces.repositories == {}


def test_the_shipped_example_of_a_nats_runtime_parses(tmp_path: Path) -> None:
    example = shipped_example("runtime")
    assert isinstance(example, dict)
    settings = parse_config(example, file=tmp_path / "c.yaml")

    assert (settings.runtime.kind, settings.runtime.url) == ("nats", "nats://10.0.0.5:4222")
    assert load_config(DEFAULTS / "config.yaml").runtime.kind == "local"


def test_a_repository_with_both_path_and_url_is_rejected(tmp_path: Path) -> None:
    error = workspaces_error(
        {"repositories": {"web": {"path": "../web", "url": "https://x/web.git"}}}, tmp_path
    )

    assert error.field == "workspaces.repositories.web"
    assert error.problem == "sets both `path` and `url`"
    assert error.fix.startswith("keep only one: `path:` (a local git repository) or `url:`")


def test_a_repository_with_neither_path_nor_url_is_rejected(tmp_path: Path) -> None:
    error = workspaces_error({"repositories": {"web": {"baseBranch": "main"}}}, tmp_path)

    assert error.field == "workspaces.repositories.web"
    assert error.problem == "needs `path` or `url`"
    assert "e.g. `{path: ../web}`" in error.fix


def test_a_cache_for_a_path_repository_is_rejected(tmp_path: Path) -> None:
    error = workspaces_error({"repositories": {"web": {"path": "a", "cache": "b"}}}, tmp_path)

    assert error.field == "workspaces.repositories.web.cache"
    assert "remove `cache:`" in error.fix


def test_an_unknown_default_repository_suggests_the_configured_one(tmp_path: Path) -> None:
    error = workspaces_error(
        {"default": "wbe", "repositories": {"web": {"path": "a"}, "api": {"path": "b"}}},
        tmp_path,
    )

    assert error.field == "workspaces.default"
    assert error.problem == "unknown repository 'wbe'; known repositories: api, web"
    assert error.fix.startswith("did you mean 'web'? name one of `workspaces.repositories`")


def test_an_unknown_channel_repository_names_the_channel(tmp_path: Path) -> None:
    error = workspaces_error(
        {"channels": {"C0123ABCD": "Web"}, "repositories": {"web": {"path": "a"}}}, tmp_path
    )

    assert error.field == "workspaces.channels.C0123ABCD"
    assert error.problem == "unknown repository 'Web'; known repositories: web"
    assert error.fix.startswith("did you mean 'web'?")


def test_a_default_without_any_repository_says_none_are_configured(tmp_path: Path) -> None:
    error = workspaces_error({"default": "web"}, tmp_path)

    assert error.field == "workspaces.default"
    assert error.problem == "unknown repository 'web'; known repositories: (none configured)"
    assert "`web: {path: ../web}`" in error.fix


def test_a_repository_name_that_is_not_plain_is_rejected_with_a_plain_one(
    tmp_path: Path,
) -> None:
    error = workspaces_error({"repositories": {"Web App": {"path": "a"}}}, tmp_path)

    assert error.field == "workspaces.repositories.Web App"
    assert error.problem == "invalid repository name 'Web App'"
    assert error.fix.startswith("did you mean 'web-app'? use lowercase letters, digits")


def test_a_base_branch_git_would_read_as_an_option_is_rejected(tmp_path: Path) -> None:
    error = workspaces_error(
        {"repositories": {"web": {"path": "a", "baseBranch": "--orphan"}}}, tmp_path
    )

    assert error.field == "workspaces.repositories.web.baseBranch"
    assert error.problem == "'--orphan' is not a valid git branch name"
    assert "`baseBranch: main`" in error.fix


def test_a_workspaces_root_holding_the_config_folder_is_rejected(tmp_path: Path) -> None:
    error = workspaces_error({"root": "."}, tmp_path)

    assert error.field == "workspaces.root"
    assert error.problem == f"{tmp_path} holds the harness's own folder ({tmp_path})"
    assert "root: .agents/workspaces" in error.fix


def test_prune_after_days_must_be_positive(tmp_path: Path) -> None:
    error = workspaces_error({"pruneAfterDays": 0}, tmp_path)

    assert error.field == "workspaces.pruneAfterDays"
    assert "greater than 0" in error.problem


def test_a_nats_runtime_names_its_server_and_resolves_its_files(tmp_path: Path) -> None:
    config = parse_config(
        {
            "runtime": {
                "kind": "nats",
                "url": "nats://10.0.0.5:4222",
                "credentials": "secrets/harness.creds",
                "prefix": "acme",
                "lostAfterSeconds": 5,
            }
        },
        file=tmp_path / "config.yaml",
    )

    runtime = config.runtime
    assert (runtime.kind, runtime.url, runtime.prefix) == ("nats", "nats://10.0.0.5:4222", "acme")
    assert runtime.credentials == tmp_path / "secrets" / "harness.creds"
    assert runtime.lost_after_seconds == 5.0
    assert parse_config({}, file=tmp_path / "config.yaml").runtime.kind == "local"


def test_a_nats_runtime_without_a_url_says_what_to_add(tmp_path: Path) -> None:
    error = parse_error({"runtime": {"kind": "nats"}}, tmp_path)
    assert error.field == "runtime"
    assert "url" in str(error) and "nats://" in str(error)


def test_an_unknown_runtime_kind_lists_the_kinds(tmp_path: Path) -> None:
    error = parse_error({"runtime": {"kind": "kubernetes"}}, tmp_path)
    assert error.field == "runtime.kind"
    assert "local" in str(error) and "nats" in str(error)


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


def test_a_missing_config_file_says_to_run_harness_init(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as caught:
        load_config(tmp_path / "config.yaml")

    assert caught.value.problem == "file not found"
    assert f"harness init {tmp_path}" in caught.value.fix
    assert "--config PATH" in caught.value.fix


def test_a_repositorys_github_short_form_takes_the_shared_api_and_the_default_token(
    tmp_path: Path,
) -> None:
    settings = parse_config(
        {
            "workspaces": {"repositories": {
                "web": {"path": "../web", "github": "acme/web"},
                "api": {"url": "https://x/api.git", "github": {
                    "repository": "acme/api", "tokenEnv": "API_TOKEN",
                    "apiUrl": "https://ghe.example.com/api/v3/",
                    "app": {"id": 12, "privateKeyFile": "keys/app.pem"}}},
            }},
            "github": {"apiUrl": "https://github.internal/api/", "autoFixTries": 2},
        },
        file=tmp_path / "config.yaml",
    )  # fmt: skip

    web = settings.workspaces.repositories["web"]
    assert web.github is not None and web.remote == "origin"
    assert (web.github.full_name, web.github.api_url, web.github.token_env) == (
        "acme/web", "https://github.internal/api", "GITHUB_TOKEN"
    )  # fmt: skip
    api = settings.workspaces.repositories["api"].github
    assert api is not None and api.api_url == "https://ghe.example.com/api/v3"
    assert api.app is not None and api.app.private_key_file == tmp_path / "keys" / "app.pem"
    assert settings.github.auto_fix_tries == 2 and settings.github.follow_checks
    assert load_config(DEFAULTS / "config.yaml").github.client_id is None


def test_a_github_repository_that_is_not_owner_slash_name_says_how_to_write_it(
    tmp_path: Path,
) -> None:
    error = workspaces_error(
        {"repositories": {"web": {"path": "../web", "github": "https://github.com/acme/web"}}},
        tmp_path,
    )

    assert error.field == "workspaces.repositories.web.github.repository"
    assert "is not owner/name" in error.problem and "`acme/web`" in error.fix


def test_too_many_automatic_fixes_are_refused_with_the_range(tmp_path: Path) -> None:
    error = parse_error({"github": {"autoFixTries": 9}}, tmp_path)

    assert error.field == "github.autoFixTries"
    assert "5" in error.problem
