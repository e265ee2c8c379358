"""config.yaml's ``sandbox:`` section: whether agents run in the OS sandbox, the hosts they may
reach, the environment variables of the harness's they get besides the allow-list
(``passEnv``), and the paths they never see (``hide``)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Annotated

import pydantic
from pydantic import Field

from harness.config.section import Section
from harness.problems import Invalid, NonEmptyStr

# A host agents may reach: `pypi.org`, `*.pythonhosted.org` (its subdomains), `host:8443`.
_HOST_PATTERN = r"^(\*\.)?[A-Za-z0-9-]+(\.[A-Za-z0-9-]+)*\.?(:[0-9]{1,5})?$"
# A variable name, or a glob of names (`AWS_*`, `LC_?`, `[A-Z]*_HOME`).
_ENV_PATTERN = r"^[A-Za-z0-9_*?\[\]!]+$"

# Secrets the harness itself reads from its environment, whatever config.yaml says, and
# what each is: no agent gets them (DESIGN: no secret enters an agent's sandbox).
KNOWN_SECRETS: dict[str, str] = {
    "SLACK_BOT_TOKEN": "the bot's Slack token",
    "SLACK_APP_TOKEN": "the bot's Slack app token",
    "SLACK_SIGNING_SECRET": "the bot's Slack signing secret",
    "HARNESS_SECRET_KEY": "the key of the linked accounts' tokens",
    "GITHUB_WEBHOOK_SECRET": "the GitHub webhook's secret",
    "ANTHROPIC_API_KEY": "the model key (the harness's proxy adds it for agents)",
    "ANTHROPIC_AUTH_TOKEN": "the model token (the harness's proxy adds it for agents)",
    "CLAUDE_CODE_OAUTH_TOKEN": "the model login (the harness's proxy adds it for agents)",
}


class _SandboxNetwork(Section):
    allow: list[Annotated[str, Field(pattern=_HOST_PATTERN)]] = Field(
        [],
        examples=[["pypi.org", "*.pythonhosted.org"]],
        description="hosts agents may reach besides the model API (`*.` for subdomains, "
        "`:port` for one port)",
    )


class SandboxSection(Section):
    enabled: bool = Field(
        True,
        examples=[True],
        description="run agents in the OS sandbox (`sandbox: off` turns it off)",
    )
    network: _SandboxNetwork = Field(default_factory=lambda: _SandboxNetwork.model_validate({}))
    pass_env: list[Annotated[str, Field(pattern=_ENV_PATTERN)]] = Field(
        [],
        alias="passEnv",
        examples=[["NODE_EXTRA_CA_CERTS", "PIP_INDEX_URL", "AWS_REGION"]],
        description="environment variables (names or globs) of the harness's that agents get "
        "besides PATH, HOME, the locale, TERM and what the harness sets; no secrets",
    )
    hide: list[NonEmptyStr] = Field(
        [],
        examples=[["/srv/secrets", "~/.netrc"]],
        description="paths agents never see, even under a folder the sandbox shows "
        "(relative to config.yaml's folder)",
    )

    @pydantic.model_validator(mode="before")
    @classmethod
    def _on_or_off(cls, value: object) -> object:
        # YAML reads `sandbox: off` as false: both turn the sandbox off, `on`/true keep it.
        if value is False or value == "off":
            return {"enabled": False}
        if value is True or value == "on":
            return {}
        return value

    def check_secrets(self, secrets: dict[str, str]) -> None:
        """Raises Invalid (at ``passEnv[i]``) for a passEnv entry that would give agents one
        of ``secrets`` (name: what it is), or the harness's own."""
        for index, pattern in enumerate(self.pass_env):
            for name, what in {**KNOWN_SECRETS, **secrets}.items():
                if fnmatchcase(name, pattern):
                    shown = f"`{pattern}` would pass" if pattern != name else "it passes"
                    raise Invalid(
                        f"{shown} {name} ({what}) to every agent",
                        fix="remove it, or name the variables agents need instead: secrets "
                        "stay with the harness, which acts for agents",
                        at=("passEnv", index),
                    )


@dataclass(frozen=True)
class SandboxSettings:
    """The agents' OS sandbox: on unless config says ``sandbox: off``; the hosts agents may
    reach besides the model API; the harness's environment variables (names or globs) agents
    get besides the allow-list; the paths (absolute) they never see."""

    enabled: bool = True
    network_allow: tuple[str, ...] = ()
    pass_env: tuple[str, ...] = ()
    hide: tuple[str, ...] = ()


def sandbox_settings(base_dir: Path, raw: SandboxSection) -> SandboxSettings:
    return SandboxSettings(
        enabled=raw.enabled,
        network_allow=tuple(raw.network.allow),
        pass_env=tuple(dict.fromkeys(raw.pass_env)),
        hide=tuple(_absolute(base_dir, path) for path in raw.hide),
    )


def _absolute(base_dir: Path, value: str) -> str:
    # normpath, not resolve(): parsing stays free of file-system access.
    return os.path.normpath(base_dir / Path(value.strip()).expanduser())
