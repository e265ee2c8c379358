"""Which environment variables an agent gets: the allow-list (pure)."""

from __future__ import annotations

from harness.sandbox.environment import SDK, allowed_names, blanked, launcher_names

HARNESS = {
    "PATH": "/usr/bin",
    "HOME": "/home/op",
    "LANG": "C.UTF-8",
    "LC_ALL": "C",
    "TERM": "xterm",
    "SLACK_BOT_TOKEN": "xoxb-1",
    "HARNESS_MCP_TOKEN_ALICE": "bearer",
    "GITHUB_WEBHOOK_SECRET": "hook",
    "RANDOM_SECRET": "random",
    "ANTHROPIC_API_KEY": "sk-ant",
    "ANTHROPIC_MODEL": "opus",
    "NODE_EXTRA_CA_CERTS": "/ca.pem",
    "AWS_REGION": "eu-west-1",
    "AWS_SECRET_ACCESS_KEY": "aws",
}


def test_only_the_toolchains_the_sdks_the_harnesss_and_passed_variables_are_allowed() -> None:
    allowed = allowed_names(
        HARNESS,
        harness_set={"HARNESS_RUN_ID", "MCP_TOOL_TIMEOUT"},
        pass_env=("NODE_EXTRA_CA_CERTS", "AWS_REG*"),
        outside=False,
    )

    assert allowed == {
        "PATH",
        "HOME",
        "LANG",
        "LC_ALL",
        "TERM",
        "NODE_EXTRA_CA_CERTS",
        "AWS_REGION",
        "HARNESS_RUN_ID",
        "MCP_TOOL_TIMEOUT",
        *SDK,
    }
    assert "CLAUDE_CODE_ENTRYPOINT" in allowed and "CLAUDE_AGENT_SDK_VERSION" in allowed


def test_outside_the_sandbox_the_cli_also_keeps_its_model_access() -> None:
    allowed = allowed_names(HARNESS, harness_set=(), pass_env=(), outside=True)

    assert {"ANTHROPIC_API_KEY", "ANTHROPIC_MODEL"} <= allowed
    assert not {"RANDOM_SECRET", "GITHUB_WEBHOOK_SECRET", "AWS_SECRET_ACCESS_KEY"} & allowed


def test_slack_variables_are_never_allowed_whatever_a_pattern_says() -> None:
    allowed = allowed_names(HARNESS, harness_set={"SLACK_APP_TOKEN"}, pass_env=("*",), outside=True)

    assert "RANDOM_SECRET" in allowed  # "*" passes the rest: config.yaml refuses it
    assert not {name for name in allowed if name.startswith("SLACK_")}


def test_outside_every_variable_not_allowed_is_overridden_empty() -> None:
    allowed = allowed_names(HARNESS, harness_set=(), pass_env=(), outside=True)

    blank = blanked(HARNESS, allowed)

    assert set(blank.values()) == {""}
    assert set(blank) == {
        "SLACK_BOT_TOKEN",
        "HARNESS_MCP_TOKEN_ALICE",
        "GITHUB_WEBHOOK_SECRET",
        "RANDOM_SECRET",
        "NODE_EXTRA_CA_CERTS",
        "AWS_REGION",
        "AWS_SECRET_ACCESS_KEY",
    }


def test_the_launcher_passes_on_the_allowed_names_but_its_own_and_the_models() -> None:
    allowed = {"PATH", "HOME", "TMPDIR", "GIT_OBJECT_DIRECTORY", "ANTHROPIC_BASE_URL", "a-b"}

    names = launcher_names(
        allowed, fixed={"GIT_OBJECT_DIRECTORY": "/o"}, withheld=("ANTHROPIC_BASE_URL",)
    )

    assert names == ("PATH",)
