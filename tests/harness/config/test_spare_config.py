"""``spares:`` in config.yaml: a count per role (in the workspace a new task gets by default),
or a count per named repository; errors name the file, the field and the fix."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.config.settings import Config, parse_config
from harness.errors import ConfigError

FILE = Path("/srv/harness/config.yaml")
WEB = {"workspaces": {"repositories": {"web": {"path": "../web"}, "api": {"path": "../api"}}}}


def parsed(spares: object) -> Config:
    return parse_config({**WEB, "spares": spares}, file=FILE)


def refused(spares: object) -> ConfigError:
    with pytest.raises(ConfigError) as caught:
        parsed(spares)
    assert caught.value.file == str(FILE)
    return caught.value


def test_a_count_keeps_spares_in_the_default_workspace_a_mapping_in_named_repositories() -> None:
    config = parsed({"developer": 1, "reviewer": {"web": 2, "api": 0}})

    assert config.spare_counts == {"developer": 1}
    assert config.repository_spare_counts == {("reviewer", "web"): 2, ("reviewer", "api"): 0}


def test_without_spares_one_of_the_default_role_is_kept_and_none_in_named_repositories() -> None:
    config = parse_config(WEB, file=FILE)

    assert config.spare_counts == {config.default_role: 1}
    assert config.repository_spare_counts == {}


def test_a_repository_that_is_not_configured_is_refused_with_the_known_ones() -> None:
    error = refused({"reviewer": {"wbe": 1}})

    assert error.field == "spares.reviewer.wbe"
    assert error.problem == "unknown repository 'wbe'; known repositories: api, web"
    assert "did you mean 'web'?" in error.fix
    assert "`reviewer: 1`" in error.fix


@pytest.mark.parametrize(
    ("spares", "field", "problem"),
    [
        (
            {"reviewer": "two"},
            "spares.reviewer",
            "expected a count from 0 to 8 or a mapping of repository names to counts, "
            "found a string ('two')",
        ),
        (
            {"reviewer": 9},
            "spares.reviewer",
            "expected a count from 0 to 8 or a mapping of repository names to counts, "
            "found an integer (9)",
        ),
        (
            {"reviewer": {"web": -1}},
            "spares.reviewer.web",
            "expected a count from 0 to 8, found an integer (-1)",
        ),
    ],
)
def test_a_count_that_is_not_one_is_refused_naming_the_field(
    spares: object, field: str, problem: str
) -> None:
    error = refused(spares)

    assert (error.field, error.problem) == (field, problem)
    assert error.fix == (
        "write `reviewer: 1`, or `reviewer: {web: 1}` to keep them in the worktrees of "
        "repository `web`"
    )
