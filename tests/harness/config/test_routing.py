from __future__ import annotations

import re
from pathlib import Path

import pytest

from harness.config.roles import Role
from harness.config.routing import Router, validate_routing
from harness.config.routing_schema import RoutingRule
from harness.config.settings import Config, parse_config
from harness.errors import ConfigError

RULES = (
    RoutingRule(re.compile(r"^(plan|analyze|spec|design|feature)\b", re.IGNORECASE), "analyst"),
    RoutingRule(re.compile(r"^review\b", re.IGNORECASE), "reviewer"),
    RoutingRule(re.compile(r"review", re.IGNORECASE), "never-reached-first"),
)


def make_role(name: str) -> Role:
    return Role(name=name, display_name=name, category="worker", prompt="p", source=f"{name}.md")


def make_config(tmp_path: Path, mapping: dict[str, object]) -> Config:
    return parse_config(mapping, file=tmp_path / "config.yaml")


def test_first_matching_rule_wins() -> None:
    router = Router(RULES, "developer")

    assert router.match("review the login code") == "reviewer"


def test_match_ignores_case_and_leading_whitespace() -> None:
    router = Router(RULES, "developer")

    assert router.match("  \n PLAN the settings page") == "analyst"


def test_match_respects_word_boundaries() -> None:
    router = Router(RULES[:2], "developer")

    assert router.match("planet names") is None
    assert router.match("reviewers wanted") is None


def test_no_match_returns_none() -> None:
    assert Router(RULES[:2], "developer").match("fix the bug") is None


def test_route_falls_back_to_the_default_role() -> None:
    assert Router(RULES, "developer").route("fix the bug") == "developer"


def test_route_follow_up_keeps_the_threads_last_role() -> None:
    assert Router(RULES, "developer").route("and the tests too", last_role="reviewer") == (
        "reviewer"
    )


def test_route_matching_rule_beats_the_threads_last_role() -> None:
    assert Router(RULES, "developer").route("plan it", last_role="reviewer") == "analyst"


def test_router_from_config_uses_its_rules_and_default(tmp_path: Path) -> None:
    config = make_config(
        tmp_path, {"defaultRole": "coder", "routing": [{"pattern": "^qa", "role": "tester"}]}
    )
    router = Router.from_config(config)

    assert router.route("QA the release") == "tester"
    assert router.route("anything") == "coder"


def test_validate_routing_accepts_known_roles(tmp_path: Path) -> None:
    config = make_config(tmp_path, {"routing": [{"pattern": "^review", "role": "reviewer"}]})

    validate_routing(
        config, {"developer": make_role("developer"), "reviewer": make_role("reviewer")}
    )  # accepted: both roles exist

    assert Router.from_config(config).route("review the login page") == "reviewer"


def test_validate_routing_rejects_an_unknown_default_role(tmp_path: Path) -> None:
    config = make_config(tmp_path, {"defaultRole": "ghost"})

    with pytest.raises(ConfigError) as caught:
        validate_routing(config, {"developer": make_role("developer")})

    assert caught.value.file == str(tmp_path / "config.yaml")
    assert caught.value.field == "defaultRole"
    assert "'ghost'" in caught.value.problem
    assert "known roles: developer" in caught.value.problem


def test_validate_routing_rejects_a_rule_with_an_unknown_role(tmp_path: Path) -> None:
    config = make_config(
        tmp_path,
        {
            "routing": [
                {"pattern": "^review", "role": "reviewer"},
                {"pattern": "^deploy", "role": "deployer"},
            ]
        },
    )
    roles = {"developer": make_role("developer"), "reviewer": make_role("reviewer")}

    with pytest.raises(ConfigError) as caught:
        validate_routing(config, roles)

    assert caught.value.field == "routing[1].role"
    assert "'deployer'" in caught.value.problem
    assert "developer, reviewer" in caught.value.problem


def test_spares_default_to_one_of_the_default_role_and_must_name_known_roles(
    tmp_path: Path,
) -> None:
    roles = {"developer": make_role("developer")}
    assert make_config(tmp_path, {}).spare_counts == {"developer": 1}
    assert make_config(tmp_path, {"spares": {}}).spare_counts == {}
    ghost = make_config(tmp_path, {"spares": {"ghost": 2}})

    with pytest.raises(ConfigError) as caught:
        validate_routing(ghost, roles)

    assert caught.value.field == "spares.ghost"
    assert "known roles: developer" in caught.value.problem
