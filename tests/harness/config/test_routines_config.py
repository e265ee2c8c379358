"""``routines:`` in config.yaml: the issue's three examples load as written (a bare ``on:`` key,
which PyYAML reads as ``true``, included); every bad setting is refused with the file, the
field and the fix; the role and an HTTP token's variable are checked at start."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest
import yaml

from harness.config.routines_schema import check_routines
from harness.config.settings import Config, parse_config
from harness.errors import ConfigError

FILE = Path("/srv/harness/config.yaml")
EXAMPLES = """
routines:
  - name: nightly-flaky
    schedule: "0 2 * * 1-5"        # five-field cron
    timezone: Europe/Paris         # IANA; default UTC
    channel: C0123456789           # each run's thread starts here
    owner: U0123456789
    role: developer
    prompt: "Find the flakiest test of the last day and fix it."
    budgetUsd: 3
    overlap: skip
    disableAfterFailures: 3
    catchUp: 30m
  - name: review-prs
    on: {github: [pull_request.opened, pull_request.ready_for_review]}
    role: reviewer
    channel: C0123456789
    prompt: "Review {pull_request.html_url}: {pull_request.title}"
  - name: deploy-check
    on: {http: {tokenEnv: DEPLOY_HOOK_TOKEN}}
    role: developer
    channel: C0123456789
    prompt: "The deploy of {payload.version} finished; check the error rate."
"""
MINIMAL: dict[str, object] = {
    "name": "nightly",
    "schedule": "0 2 * * *",
    "channel": "C0123",
    "role": "developer",
    "prompt": "Fix it.",
}


def parsed(*routines: dict[str, object], **top: object) -> Config:
    return parse_config({"routines": list(routines), **top}, file=FILE)


def test_the_issues_examples_load_with_on_read_either_way() -> None:
    config = parse_config(yaml.safe_load(EXAMPLES), file=FILE)

    nightly, review, deploy = config.routines
    assert (nightly.kind, nightly.timezone, nightly.catch_up) == (
        "schedule", "Europe/Paris", timedelta(minutes=30),
    )  # fmt: skip
    assert nightly.schedule is not None and nightly.budget_usd == 3
    assert (review.kind, review.events) == (
        "github", ("pull_request.opened", "pull_request.ready_for_review"),
    )  # fmt: skip
    assert (deploy.kind, deploy.token_env, deploy.owner) == ("http", "DEPLOY_HOOK_TOKEN", None)
    quoted = parsed({**MINIMAL, "schedule": None, "on": {"http": {"tokenEnv": "HOOK"}}})
    assert quoted.routines[0].kind == "http"


@pytest.mark.parametrize(
    ("change", "field", "problem", "fix"),
    [
        (
            {"name": "Nightly_1"},
            "routines[0].name",
            "'Nightly_1' is not a routine name",
            "use lowercase letters, digits and dashes",
        ),
        (
            {"schedule": "0 25 * * *"},
            "routines[0].schedule",
            "hour 25 is out of range 0-23",
            "write five fields",
        ),
        (
            {"timezone": "Paris"},
            "routines[0].timezone",
            "unknown time zone 'Paris'",
            "IANA time zone name",
        ),
        (
            {"channel": "#general"},
            "routines[0].channel",
            "'#general' is not a Slack channel id",
            "write the channel id",
        ),
        (
            {"owner": "alice@example.com"},
            "routines[0].owner",
            "'alice@example.com' is not a Slack user id",
            "write the member id",
        ),
        (
            {"schedule": None},
            "routines[0]",
            "needs exactly one trigger: `schedule` or `on`",
            "write `schedule:",
        ),
        (
            {"on": {"http": {"tokenEnv": "X"}}},
            "routines[0]",
            "needs exactly one trigger: `schedule` or `on`",
            "write `schedule:",
        ),
        (
            {"schedule": None, "on": {"github": ["pull request opened"]}},
            "routines[0].on.github[0]",
            "'pull request opened' is not a GitHub event name",
            "`pull_request.opened`",
        ),
        (
            {"schedule": None, "on": {}},
            "routines[0].on",
            "needs exactly one of `github` and `http`",
            "write `on: {github:",
        ),
        ({"overlap": "wait"}, "routines[0].overlap", "", "skip"),
        (
            {"catchUp": "half an hour"},
            "routines[0].catchUp",
            "'half an hour' is not a duration",
            "`30m`",
        ),
        (
            {"repository": "web"},
            "routines[0].repository",
            "unknown repository 'web'; known repositories: (none configured)",
            "leave `repository` out",
        ),
        ({"disableAfterFailures": 0}, "routines[0].disableAfterFailures", "", ""),
    ],
)
def test_a_bad_setting_names_its_field_and_the_fix(
    change: dict[str, object], field: str, problem: str, fix: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        parsed({k: v for k, v in {**MINIMAL, **change}.items() if v is not None})

    error = caught.value
    assert (error.file, error.field) == (str(FILE), field)
    assert problem in error.problem
    assert fix in error.fix


def test_two_routines_of_one_name_are_refused() -> None:
    with pytest.raises(ConfigError) as caught:
        parsed(MINIMAL, MINIMAL)

    assert caught.value.field == "routines[1].name"
    assert "used twice" in caught.value.problem


def test_an_unknown_role_and_an_unset_token_are_said_at_start() -> None:
    config = parse_config(yaml.safe_load(EXAMPLES), file=FILE)

    with pytest.raises(ConfigError) as role:
        check_routines(config.routines, ["developer"], None, file=FILE)
    with pytest.raises(ConfigError) as token:
        check_routines(config.routines, ["developer", "reviewer"], {}, file=FILE)
    check_routines(config.routines, ["developer", "reviewer"], None, file=FILE)  # no server
    check_routines(config.routines, ["developer", "reviewer"],
                   {"DEPLOY_HOOK_TOKEN": "f" * 32}, file=FILE)  # fmt: skip

    assert role.value.field == "routines[1].role"
    assert "unknown role 'reviewer' (routine review-prs)" in role.value.problem
    assert token.value.field == "routines[2].on.http.tokenEnv"
    assert (
        token.value.problem == "$DEPLOY_HOOK_TOKEN is not set (the token of routine deploy-check)"
    )
    assert "export DEPLOY_HOOK_TOKEN=" in token.value.fix


def test_a_github_routine_names_a_repository_on_github_or_none() -> None:
    repositories = {"web": {"path": "../web", "github": "acme/web"}, "api": {"path": "../api"}}
    workspaces = {"workspaces": {"repositories": repositories}}
    on_github = {**MINIMAL, "schedule": None, "on": {"github": ["pull_request.opened"]}}
    del on_github["schedule"]

    config = parsed({**on_github, "repository": "web"}, **workspaces)
    with pytest.raises(ConfigError) as caught:
        parsed({**on_github, "repository": "api"}, **workspaces)

    assert config.routines[0].repository == "web"
    assert caught.value.field == "routines[0].repository"
    assert caught.value.problem == "repository 'api' has no `github:`, so no GitHub event names it"
    assert "add `github: OWNER/NAME` to workspaces.repositories.api" in caught.value.fix
