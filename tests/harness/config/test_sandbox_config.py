"""config.yaml's ``sandbox:`` (passEnv, hide), the retired withholdEnv, and a role's ``env:``."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from harness.agents.runs import harness_files
from harness.config.roles import parse_role
from harness.config.settings import parse_config
from harness.errors import ConfigError, RoleError


def parse_error(mapping: dict[str, object], tmp_path: Path) -> ConfigError:
    with pytest.raises(ConfigError) as caught:
        parse_config(mapping, file=tmp_path / "config.yaml")
    return caught.value


def test_pass_env_names_and_globs_and_hidden_paths_resolved_from_the_config_folder(
    tmp_path: Path,
) -> None:
    config = parse_config(
        {
            "sandbox": {
                "passEnv": ["NODE_EXTRA_CA_CERTS", "AWS_REG*", "NODE_EXTRA_CA_CERTS"],
                "hide": ["secrets/app.pem", "/srv/keys"],
            }
        },
        file=tmp_path / "config.yaml",
    )

    assert config.sandbox.pass_env == ("NODE_EXTRA_CA_CERTS", "AWS_REG*")
    assert config.sandbox.hide == (str(tmp_path / "secrets/app.pem"), "/srv/keys")
    assert config.sandbox.enabled
    default = parse_config({}, file=tmp_path / "config.yaml").sandbox
    assert default.pass_env == () and default.hide == ()


def test_sandbox_off_still_reads() -> None:
    config = parse_config({"sandbox": "off"}, file=Path("/c/config.yaml"))

    assert not config.sandbox.enabled and config.sandbox.pass_env == ()


@pytest.mark.parametrize(
    ("entry", "said"),
    [
        ("*", "`*` would pass SLACK_BOT_TOKEN (the bot's Slack token)"),
        ("SLACK_*", "would pass SLACK_BOT_TOKEN"),
        ("HARNESS_SECRET_KEY", "it passes HARNESS_SECRET_KEY (the key of the linked accounts"),
        ("GITHUB_*", "would pass GITHUB_WEBHOOK_SECRET (the GitHub webhook's secret)"),
        ("ANTHROPIC_API_KEY", "the model key (the harness's proxy adds it for agents)"),
        ("DEPLOY_TOKEN", "the bearer token of U012ABCDEF for `harness mcp`"),
        ("BOT_GH_*", "would pass BOT_GH_TOKEN (the GitHub token of repository web)"),
    ],
)
def test_pass_env_that_would_give_agents_a_secret_is_an_error_naming_the_entry(
    tmp_path: Path, entry: str, said: str
) -> None:
    web = {"path": "../web", "github": {"repository": "acme/web", "tokenEnv": "BOT_GH_TOKEN"}}
    error = parse_error(
        {
            "mcpServer": {"tokens": [{"user": "U012ABCDEF", "tokenEnv": "DEPLOY_TOKEN"}]},
            "workspaces": {"repositories": {"web": web}},
            "sandbox": {"passEnv": ["LANG", entry]},
        },
        tmp_path,
    )

    assert error.file == str(tmp_path / "config.yaml")
    assert error.field == "sandbox.passEnv[1]"
    assert said in error.problem
    assert "name the variables agents need instead" in error.fix


def test_pass_env_entries_are_names_or_globs(tmp_path: Path) -> None:
    error = parse_error({"sandbox": {"passEnv": ["MY TOKEN"]}}, tmp_path)

    assert error.field == "sandbox.passEnv[0]"
    assert "passEnv: [NODE_EXTRA_CA_CERTS" in error.fix


def test_hide_is_a_list_of_paths(tmp_path: Path) -> None:
    error = parse_error({"sandbox": {"hide": "/srv/keys"}}, tmp_path)

    assert error.field == "sandbox.hide"
    assert "hide: [/srv/secrets" in error.fix


def test_an_old_config_with_withhold_env_loads_and_says_it_is_no_longer_used(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING):
        config = parse_config({"withholdEnv": ["AWS_*"]}, file=tmp_path / "config.yaml")

    assert config.sandbox.pass_env == ()
    assert "withholdEnv is no longer used" in caplog.text and "remove it" in caplog.text
    with caplog.at_level(logging.WARNING):
        caplog.clear()
        parse_config({"withholdEnv": []}, file=tmp_path / "config.yaml")
    assert caplog.text == ""
    error = parse_error({"withholdEnv": "AWS_*"}, tmp_path)
    assert error.field == "withholdEnv"


def test_every_secret_file_config_names_and_hidden_path_is_kept_from_agents(
    tmp_path: Path,
) -> None:
    app = {"id": 1, "privateKeyFile": "/etc/harness/app.pem"}
    config = parse_config(
        {
            "runtime": {"kind": "nats", "url": "nats://n:4222", "credentials": "nats.creds"},
            "workspaces": {
                "repositories": {
                    "web": {"path": "../web", "github": {"repository": "a/w", "app": app}}
                }
            },
            "sandbox": {"hide": ["/srv/keys"]},
        },
        file=tmp_path / "config.yaml",
    )

    hidden = harness_files(config)

    assert {
        str(tmp_path / "config.yaml"),
        "/etc/harness/app.pem",
        str(tmp_path / "nats.creds"),
        str(tmp_path / ".agents/tasks/.secret-key"),
        "/srv/keys",
    } <= set(hidden)


ROLE = "---\nname: dev\ncategory: worker\n{env}---\nYou write code.\n"


def test_a_role_gives_its_agents_environment_variables() -> None:
    role = parse_role(
        ROLE.format(env="env:\n  NODE_OPTIONS: --max-old-space-size=4096\n  CI: 'true'\n"),
        source="roles/dev.md",
        base_dir=Path("/p"),
    )

    assert role.env == {"NODE_OPTIONS": "--max-old-space-size=4096", "CI": "true"}
    assert parse_role(ROLE.format(env=""), source="r.md", base_dir=Path("/p")).env == {}


@pytest.mark.parametrize(
    ("line", "field", "said", "fix"),
    [
        ("RETRIES: 3", "env.RETRIES", "expected a string, found an integer", "make it a string"),
        ("1X: a", "env.1X", "'1X' is not an environment variable name", "letters, digits"),
        ("HOME: /x", "env.HOME", "HOME cannot be set by a role", "remove it"),
        ("ANTHROPIC_API_KEY: k", "env.ANTHROPIC_API_KEY", "holds the key", "`model:`"),
        ("SLACK_BOT_TOKEN: x", "env.SLACK_BOT_TOKEN", "never reach an agent", "remove it"),
        ("HTTPS_PROXY: x", "env.HTTPS_PROXY", "proxy", "sandbox.network.allow"),
        ("MCP_TOOL_TIMEOUT: '9'", "env.MCP_TOOL_TIMEOUT", "harness sets it", "toolTimeoutMs"),
    ],
)
def test_a_role_env_error_names_the_file_the_variable_and_the_fix(
    line: str, field: str, said: str, fix: str
) -> None:
    with pytest.raises(RoleError) as caught:
        parse_role(ROLE.format(env=f"env:\n  {line}\n"), source="roles/dev.md", base_dir=Path("/"))

    error = caught.value
    assert (error.file, error.field) == ("roles/dev.md", field)
    assert said in error.problem and fix in error.fix
