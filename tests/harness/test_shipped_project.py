"""The config.yaml and roles/ shipped in the package (harness/defaults/) load, validate and
route."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from harness.cli.scaffold import DEFAULTS
from harness.config.roles import BUILTIN_TOOLS, load_roles
from harness.config.routing import Router, validate_routing
from harness.config.settings import load_config
from harness.errors import RoleError
from harness.permissions.rules import decide
from harness.permissions.sandboxed import within_sandbox
from harness.project import load_project


def test_shipped_config_and_roles_load_and_validate() -> None:
    config = load_config(DEFAULTS / "config.yaml")
    roles = load_roles(config.roles_dir, base_dir=config.base_dir)

    validate_routing(config, roles)
    assert config.default_role == "developer"
    assert {"developer", "reviewer", "product-analyst"} <= set(roles)


def test_shipped_routing_sends_messages_to_the_documented_roles() -> None:
    router = Router.from_config(load_config(DEFAULTS / "config.yaml"))

    assert router.route("Plan the settings page") == "product-analyst"
    assert router.route("feature: dark mode") == "product-analyst"
    assert router.route("review the last change") == "reviewer"
    assert router.route("fix the login bug") == "developer"
    assert router.route("and add a test", last_role="reviewer") == "reviewer"


def test_shipped_roles_have_the_documented_categories_and_tools() -> None:
    config = load_config(DEFAULTS / "config.yaml")
    roles = load_roles(config.roles_dir, base_dir=config.base_dir)

    assert roles["product-analyst"].category in config.mcp.full_access_categories
    assert roles["developer"].category == "worker"
    assert roles["developer"].permission_mode == "acceptEdits"
    assert roles["developer"].tools == ("Read", "Write", "Edit", "Bash", "Glob", "Grep")
    assert roles["reviewer"].category == "worker"
    assert roles["reviewer"].tools == ("Read", "Glob", "Grep")


def test_shipped_reviewer_cannot_write_edit_or_run_commands() -> None:
    config = load_config(DEFAULTS / "config.yaml")
    reviewer = load_roles(config.roles_dir, base_dir=config.base_dir)["reviewer"]

    assert reviewer.tools is not None
    assert not {"Write", "Edit", "MultiEdit", "NotebookEdit", "Bash"} & set(reviewer.tools)


def test_shipped_role_prompts_ask_for_the_structured_result() -> None:
    config = load_config(DEFAULTS / "config.yaml")
    roles = load_roles(config.roles_dir, base_dir=config.base_dir)

    for role in roles.values():
        for field in ("summary", "changes", "issues", "questions"):
            assert f"`{field}`" in role.prompt, (role.name, field)


def test_shipped_analyst_prompt_explains_the_harness_tools() -> None:
    config = load_config(DEFAULTS / "config.yaml")
    prompt = load_roles(config.roles_dir, base_dir=config.base_dir)["product-analyst"].prompt

    tools = ("draft_agent", "await_agent", "kill_agent", "list_agents", "get_task_context")
    for tool in (*tools, "open_pull_request"):
        assert f"mcp__harness__{tool}" in prompt


def test_shipped_project_passes_the_cross_checks_between_config_and_roles() -> None:
    project = load_project(DEFAULTS / "config.yaml")

    categories = {role.category for role in project.roles.values()}
    assert set(project.config.mcp.full_access_categories) <= categories
    for role in project.roles.values():
        assert set(role.tools or ()) <= set(BUILTIN_TOOLS), role.name


def test_a_misspelled_category_in_a_copy_of_the_shipped_project_fails_at_load(
    tmp_path: Path,
) -> None:
    shutil.copy(DEFAULTS / "config.yaml", tmp_path / "config.yaml")
    shutil.copytree(DEFAULTS / "roles", tmp_path / "roles")
    analyst = tmp_path / "roles" / "product-analyst.md"
    text = analyst.read_text(encoding="utf-8")
    analyst.write_text(
        text.replace("category: conversational", "category: conversatonal"), encoding="utf-8"
    )

    with pytest.raises(RoleError) as caught:
        load_project(tmp_path / "config.yaml")

    assert caught.value.file == str(analyst)
    assert caught.value.field == "category"
    assert "did you mean 'conversational'?" in caught.value.fix


def test_shipped_developer_runs_tests_and_asks_for_anything_else(tmp_path: Path) -> None:
    config = load_config(DEFAULTS / "config.yaml")
    developer = load_roles(config.roles_dir, base_dir=config.base_dir)["developer"]

    def decision(tool: str, tool_input: dict[str, object]) -> str:
        return decide(
            tool, tool_input, allow=developer.allow, deny=developer.deny, cwd=tmp_path
        ).decision

    assert decision("Bash", {"command": "pytest -q"}) == "allow"
    assert decision("Bash", {"command": "npm run test -- -k x"}) == "allow"
    assert decision("Bash", {"command": "git diff --stat && git status"}) == "allow"
    assert decision("Bash", {"command": "curl example.com"}) == "ask"
    assert decision("Bash", {"command": "pytest -q && curl example.com"}) == "ask"
    assert decision("Bash", {"command": "pytest -q && rm -rf /"}) == "deny"
    assert decision("Bash", {"command": "git push --force"}) == "ask"
    assert decision("Bash", {"command": "sudo make install"}) == "deny"
    assert decision("Edit", {"file_path": str(tmp_path / "src" / "app.py")}) == "allow"
    assert decision("Write", {"file_path": str(tmp_path / "README.md")}) == "allow"
    assert decision("Write", {"file_path": "/etc/profile"}) == "ask"


def test_shipped_config_sandboxes_agents_where_what_stays_inside_runs_and_a_push_is_asked(
    tmp_path: Path,
) -> None:
    config = load_config(DEFAULTS / "config.yaml")

    assert config.sandbox.enabled and config.sandbox.network_allow == ()
    assert within_sandbox("Bash", {"command": "curl example.com"}, cwd=tmp_path) == "allow"
    assert within_sandbox("Bash", {"command": "git push --force"}, cwd=tmp_path) == "ask"
    assert within_sandbox("Write", {"file_path": "/etc/profile"}, cwd=tmp_path) == "ask"


def test_shipped_developer_prompt_says_other_commands_are_asked() -> None:
    config = load_config(DEFAULTS / "config.yaml")
    prompt = load_roles(config.roles_dir, base_dir=config.base_dir)["developer"].prompt

    assert "asked of a human" in prompt
    assert "may be denied" in prompt


def test_shipped_reviewer_allows_only_read_only_git() -> None:
    config = load_config(DEFAULTS / "config.yaml")
    reviewer = load_roles(config.roles_dir, base_dir=config.base_dir)["reviewer"]

    assert {rule.text for rule in reviewer.allow} == {
        "Bash(git status:*)",
        "Bash(git diff:*)",
        "Bash(git log:*)",
        "Bash(git show:*)",
    }
    assert reviewer.deny == ()


def test_shipped_defaults_cap_every_agent_and_every_task() -> None:
    config = load_config(DEFAULTS / "config.yaml")
    roles = load_roles(config.roles_dir, base_dir=config.base_dir)

    assert config.mcp.task_budget_usd is not None and config.mcp.task_budget_usd <= 20
    for role in roles.values():
        assert role.model == "sonnet", role.name
        assert role.max_turns is not None and role.max_turns <= 100, role.name
        assert role.max_budget_usd is not None and role.max_budget_usd <= 5, role.name
        assert role.example, role.name  # a suggested prompt in Slack
