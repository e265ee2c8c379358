"""Whether agents that run on this machine can reach a model, and the environment that sends
them to a scripted one instead.

What counts as access is what the bundled Claude Code CLI (2.1.330) accepts: an API key or
token in the environment, a gateway or proxy (``ANTHROPIC_BASE_URL``), a cloud provider
(Bedrock, Vertex, Foundry), or Claude Code logged in on this machine.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from harness.errors import HarnessError

KEY_VARIABLES = (
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_AUTH_TOKEN",
    "CLAUDE_CODE_OAUTH_TOKEN",
    "ANTHROPIC_BASE_URL",
)
PROVIDER_SWITCHES = ("CLAUDE_CODE_USE_BEDROCK", "CLAUDE_CODE_USE_VERTEX", "CLAUDE_CODE_USE_FOUNDRY")
_TRUE = {"1", "true", "yes", "on"}


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


def scripted_env(model_env: Mapping[str, str]) -> dict[str, str]:
    """The agents' environment for the scripted model: the other routes to a model blanked,
    so no key that happens to be exported takes the agents (and a bill) elsewhere."""
    others = {name: "" for name in (*KEY_VARIABLES, *PROVIDER_SWITCHES)}
    return {**others, **model_env}
