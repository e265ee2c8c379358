"""A role's ``env:``: the environment variables its agents get, besides the allow-list every
agent gets (``harness/sandbox/environment.py``). Names only a shell can expand, and none the
harness sets for every agent or a secret's."""

from __future__ import annotations

from fnmatch import fnmatchcase

from harness.config.env_name import SHELL_NAME
from harness.problems import Invalid

# Variables a role may not set, why, and what to do instead: the harness sets them for every
# agent (its sandbox, its run, its model access, its git view) or they are secrets.
_RESERVED_ENV: tuple[tuple[tuple[str, ...], str, str], ...] = (
    (("HOME", "TMPDIR", "PWD"), "the sandbox gives each agent its own", "remove it"),
    (
        ("HARNESS_RUN_ID", "CLAUDE_CONFIG_DIR", "ENABLE_TOOL_SEARCH", "CLAUDE_CODE_ENTRYPOINT"),
        "the harness sets it for every agent",
        "remove it",
    ),
    (("MCP_TOOL_TIMEOUT",), "the harness sets it", "set `mcp.toolTimeoutMs` in config.yaml"),
    (("CLAUDE_CODE_MAX_RETRIES",), "the harness sets it", "set `modelApiRetries` in config.yaml"),
    (("CLAUDE_AGENT_SDK_*",), "the Claude Agent SDK sets it", "remove it"),
    (
        ("ANTHROPIC_*", "CLAUDE_CODE_OAUTH_TOKEN", "CLAUDE_CODE_USE_*"),
        "agents reach the model through the harness, which holds the key",
        "remove it; choose the model with `model:`",
    ),
    (
        ("HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "http_proxy", "https_proxy", "no_proxy"),
        "the sandbox points it at the harness's proxy",
        "remove it; let agents reach hosts with `sandbox.network.allow` in config.yaml",
    ),
    (
        ("GIT_DIR", "GIT_WORK_TREE", "GIT_COMMON_DIR", "GIT_INDEX_FILE", "GIT_OBJECT_DIRECTORY"),
        "the harness sets up each agent's git",
        "remove it",
    ),
    (
        ("GIT_ALTERNATE_OBJECT_DIRECTORIES", "GIT_CEILING_DIRECTORIES"),
        "the harness sets up each agent's git",
        "remove it",
    ),
    (("SLACK_*",), "Slack's credentials never reach an agent", "remove it"),
)


def role_env(value: dict[str, str]) -> dict[str, str]:
    """``value`` as it is; Invalid (at the name) for a name a role may not set."""
    for name in value:
        if not SHELL_NAME.match(name):  # the launcher passes it by shell
            raise Invalid(
                f"{name!r} is not an environment variable name",
                fix="use letters, digits and `_`, not starting with a digit, e.g. `NODE_OPTIONS`",
                at=(name,),
            )
        for patterns, why, fix in _RESERVED_ENV:
            if any(fnmatchcase(name, pattern) for pattern in patterns):
                raise Invalid(f"{name} cannot be set by a role: {why}", fix=fix, at=(name,))
    return value
