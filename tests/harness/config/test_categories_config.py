"""The categories config.yaml names must be some role's (harness.project.check_categories)."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.config.roles import Role
from harness.config.settings import Config, parse_config
from harness.errors import ConfigError
from harness.project import check_categories
from harness.tools.access import tools_for_category


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
