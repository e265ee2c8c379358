"""Which environment variables an agent gets: an allow-list, nothing else. Pure.

The harness process holds secrets in its environment (Slack tokens, the MCP server's bearer
tokens, webhook secrets, whatever the operator exported), and agents run commands that can
print theirs. So an agent's CLI, and every process it starts, gets only:

- what a toolchain needs to run (``BASE``: the search path, the locale, the terminal...);
- what the Claude Agent SDK sets for the CLI (``SDK``: read from its subprocess transport),
  and the CLI's own switches an operator may set (``CLI``: no calls home, limits);
- what the harness itself sets for the run: the runtime's and the spec's ``env`` (tool
  timeouts, retries, the run id, git's ceiling), the git view's variables, the role's
  ``env:``; and outside the sandbox the CLI's own folder and the model access it needs;
- what the operator names in config.yaml's ``sandbox.passEnv`` (names or globs).

In the sandbox bubblewrap starts from an empty environment and sets these; outside it the
SDK merges the process environment under the options' ``env``, so every other variable is
overridden there with "" (``blanked``).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from fnmatch import fnmatchcase

from harness.config.env_name import SHELL_NAME

# What toolchains need: the search path, the locale, the time zone, the terminal's kind
# (programs pick plain output for `dumb`), who the user is and their shell (the CLI's Bash
# tool runs it). HOME and TMPDIR too, which the sandbox sets to its own.
BASE: tuple[str, ...] = (
    "PATH",
    "HOME",
    "TMPDIR",
    "LANG",
    "LANGUAGE",
    "LC_*",
    "TZ",
    "TERM",
    "USER",
    "LOGNAME",
    "SHELL",
)
# What claude-agent-sdk 0.2.187's subprocess transport sets for the CLI itself
# (_internal/transport/subprocess_cli.py: the entry point, its version, the client app's
# label, the trace context, session-state frames, file checkpoints, the working folder).
SDK: tuple[str, ...] = (
    "CLAUDE_CODE_ENTRYPOINT",
    "CLAUDE_AGENT_SDK_VERSION",
    "CLAUDE_AGENT_SDK_CLIENT_APP",
    "CLAUDE_AGENT_SDK_DERIVED_CLIENT_APP",
    "CLAUDE_CODE_SDK_READS_SESSION_STATE",
    "CLAUDE_CODE_ENABLE_SDK_FILE_CHECKPOINTING",
    "TRACEPARENT",
    "TRACESTATE",
    "PWD",
)
# The Claude Code CLI's own switches an operator may set for it, none a secret: no traffic
# but the model's (else a sandboxed CLI's calls home are asked in the thread), no telemetry,
# its output and timeout limits.
CLI: tuple[str, ...] = (
    "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC",
    "DISABLE_TELEMETRY",
    "DISABLE_ERROR_REPORTING",
    "DISABLE_AUTOUPDATER",
    "DISABLE_BUG_COMMAND",
    "DISABLE_NON_ESSENTIAL_MODEL_CALLS",
    "CLAUDE_CODE_MAX_OUTPUT_TOKENS",
    "MAX_THINKING_TOKENS",
    "MAX_MCP_OUTPUT_TOKENS",
    "BASH_DEFAULT_TIMEOUT_MS",
    "BASH_MAX_TIMEOUT_MS",
    "BASH_MAX_OUTPUT_LENGTH",
)
# How the CLI reaches the model when it runs outside the sandbox (in it, the bridge points
# it at the harness's proxy, which holds the key): a key, a token, a base URL, a provider.
MODEL_ACCESS: tuple[str, ...] = ("ANTHROPIC_*", "CLAUDE_CODE_OAUTH_TOKEN", "CLAUDE_CODE_USE_*")
# Never passed, whatever a pattern says: the bot's Slack credentials (DESIGN: they never
# reach an agent in any form).
NEVER: tuple[str, ...] = ("SLACK_*",)


def matches(name: str, patterns: Iterable[str]) -> bool:
    """Whether ``name`` matches one of the glob ``patterns`` (case-sensitive)."""
    return any(fnmatchcase(name, pattern) for pattern in patterns)


def allowed_names(
    present: Iterable[str],
    *,
    harness_set: Iterable[str],
    pass_env: Sequence[str],
    outside: bool,
) -> frozenset[str]:
    """The variables an agent's CLI may have, of those ``present`` in the environment it
    would inherit, those the harness sets (``harness_set``) and those the SDK sets:
    ``BASE``, ``CLI`` and ``pass_env`` matches, plus ``MODEL_ACCESS`` ones when it runs ``outside``
    the sandbox. ``NEVER`` ones never."""
    patterns = (*BASE, *CLI, *pass_env, *(MODEL_ACCESS if outside else ()))
    names = {name for name in present if matches(name, patterns)}
    names |= set(harness_set) | set(SDK)
    return frozenset(name for name in names if not matches(name, NEVER))


def blanked(environ: Iterable[str], allowed: Collection[str]) -> dict[str, str]:
    """Outside the sandbox: each variable of the process environment ``environ`` that is not
    ``allowed``, overridden with "" (the SDK lets the options' ``env`` override the process
    environment, never drop from it)."""
    return {name: "" for name in environ if name not in allowed}


def launcher_names(
    allowed: Iterable[str], *, fixed: Mapping[str, str], withheld: Iterable[str]
) -> tuple[str, ...]:
    """In the sandbox: the allowed names the launcher passes on by the value they have when
    it runs (the SDK sets some only then), sorted; not those set to ``fixed`` values inside
    (the git view's; its home and ``/tmp`` are its own), nor the ``withheld`` ones (the
    model's, which the bridge sets), nor a name a shell cannot expand."""
    skip = {"HOME", "TMPDIR", *fixed, *withheld}
    return tuple(sorted(n for n in allowed if n not in skip and SHELL_NAME.match(n)))
