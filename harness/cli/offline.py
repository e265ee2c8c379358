"""Whether the agents can reach a model, checked before ``harness run`` creates a task; and
the scripted model ``harness run --scripted`` runs them on instead, offline and free.

What counts as access is what the bundled Claude Code CLI (2.1.330) accepts: an API key or
token in the environment, a gateway or proxy (``ANTHROPIC_BASE_URL``), a cloud provider
(Bedrock, Vertex, Foundry), or Claude Code logged in on this machine.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import AsyncIterator, Mapping
from pathlib import Path

from harness.errors import HarnessError
from harness.runtime.spec import AgentRuntime

KEY_VARIABLES = (
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_AUTH_TOKEN",
    "CLAUDE_CODE_OAUTH_TOKEN",
    "ANTHROPIC_BASE_URL",
)
PROVIDER_SWITCHES = ("CLAUDE_CODE_USE_BEDROCK", "CLAUDE_CODE_USE_VERTEX", "CLAUDE_CODE_USE_FOUNDRY")
_TRUE = {"1", "true", "yes", "on"}
SCRIPTED_NOTE = (
    "--scripted: the agents talk to the scripted demo model on this machine, not to Claude "
    "(offline, no API key used)"
)


def model_access(environ: Mapping[str, str], home: Path) -> str | None:
    """What gives the agents a model, in words (None when nothing does): the first variable
    set, else Claude Code's login (its credentials file, or on macOS, where the keychain
    holds them, the account its config names) or its ``apiKeyHelper`` setting."""
    for name in KEY_VARIABLES:
        if environ.get(name, "").strip():
            return f"${name}"
    for name in PROVIDER_SWITCHES:
        if environ.get(name, "").strip().lower() in _TRUE:
            return f"${name}"
    custom = environ.get("CLAUDE_CONFIG_DIR", "").strip()
    folder = Path(custom) if custom else home / ".claude"
    if (folder / ".credentials.json").is_file():
        return f"the Claude Code login in {folder}"
    account = folder / ".claude.json" if custom else home / ".claude.json"
    if '"oauthAccount"' in _read(account):
        return f"the Claude Code login named in {account}"
    if '"apiKeyHelper"' in _read(folder / "settings.json"):
        return f"the apiKeyHelper in {folder / 'settings.json'}"
    return None


def _read(file: Path) -> str:
    try:
        return file.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""


def require_model_access(environ: Mapping[str, str], home: Path) -> None:
    """Raise, saying what to set, when the agents could not reach any model."""
    if model_access(environ, home) is None:
        raise HarnessError(
            "no way to reach a model: ANTHROPIC_API_KEY is not set and Claude Code is not "
            "logged in on this machine (nothing was started)",
            fix="export ANTHROPIC_API_KEY=sk-ant-... (or ANTHROPIC_AUTH_TOKEN, "
            "CLAUDE_CODE_OAUTH_TOKEN, ANTHROPIC_BASE_URL for a gateway), or try it offline on "
            'the scripted model: harness run --scripted "plan: a settings page"',
        )


def check_before_run(config_runtime: str, *, scripted: bool) -> None:
    """The check ``harness run`` makes: only agents that run here need access from here
    (with ``runtime: nats`` the workers' machines reach the model, and this one needs the
    NATS client, nats-py)."""
    if not scripted and config_runtime == "local":
        require_model_access(os.environ, Path.home())
    if not scripted and config_runtime == "nats":
        from harness.runtime.nats_link import require_nats

        require_nats()


@contextlib.asynccontextmanager
async def scripted_runtime() -> AsyncIterator[AgentRuntime]:
    """Agents on this machine talking to the shipped scripted model on loopback
    (``demo_script``: an analyst drafts and awaits a developer, other roles report at once)."""
    # Imported here: the Claude SDK takes most of a second to import.
    from harness.runtime.claude import ClaudeRuntime
    from harness.testing.scripted_model import ScriptedModel, demo_script

    async with ScriptedModel(demo_script) as model:
        yield ClaudeRuntime(base_env=scripted_env(model.env()))


def scripted_env(model_env: Mapping[str, str]) -> dict[str, str]:
    """The agents' environment for the scripted model: the other routes to a model blanked,
    so no key that happens to be exported takes the agents (and a bill) elsewhere."""
    others = {name: "" for name in (*KEY_VARIABLES, *PROVIDER_SWITCHES)}
    return {**others, **model_env}


def exported_keys(environ: Mapping[str, str]) -> list[str]:
    """The model and Slack credentials set in ``environ`` (names only), for saying that an
    offline demo leaves them unused."""
    names = [*KEY_VARIABLES, "SLACK_BOT_TOKEN", "SLACK_APP_TOKEN"]
    return [name for name in names if environ.get(name)]


def harness_command() -> str:
    """How to run ``harness`` from here: the script installed next to this Python (a .venv's
    bin/ is seldom on PATH), else ``python -m harness``."""
    script = Path(sys.executable).parent / "harness"
    if script.exists():
        try:
            return str(script.relative_to(Path.cwd()))
        except ValueError:
            return str(script)
    return f"{sys.executable} -m harness"
