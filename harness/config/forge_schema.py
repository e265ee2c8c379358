"""config.yaml's schema for pull requests: a repository's forge (``github:`` under a
repository in ``workspaces.repositories``) and the shared ``github:`` section (where the API
is, linking people's accounts, following checks), and the settings they become."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Self

import pydantic
from pydantic import Field

from harness.config.env_name import SHELL_NAME
from harness.config.section import Section, resolve
from harness.problems import Invalid, NonEmptyStr

_FULL_NAME = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})/[A-Za-z0-9._-]{1,100}$")
_URL = r"^https?://[^\s/]+(/\S*)?$"


class GitHubApp(Section):
    id: int = Field(examples=[123456], ge=1, description="the GitHub App's id")
    private_key_file: NonEmptyStr = Field(
        alias="privateKeyFile",
        examples=["/etc/harness/github-app.pem"],
        description="the App's private key (PEM); agents never see it",
    )
    installation_id: int | None = Field(
        None,
        alias="installationId",
        ge=1,
        examples=[7654321],
        description="default: the installation on the repository, asked of GitHub",
    )


class RepositoryGitHub(Section):
    repository: str = Field(
        examples=["acme/web"], description="the repository on GitHub, as owner/name"
    )
    token_env: str = Field(
        "GITHUB_TOKEN",
        alias="tokenEnv",
        pattern=SHELL_NAME.pattern,
        examples=["GITHUB_TOKEN"],
        description="the environment variable holding the bot's token (agents never see it)",
    )
    app: GitHubApp | None = Field(
        None, description="authenticate as a GitHub App installation instead of a token"
    )
    api_url: str | None = Field(
        None,
        alias="apiUrl",
        pattern=_URL,
        examples=["https://ghe.example.com/api/v3"],
        description="default: `github.apiUrl`",
    )

    @pydantic.model_validator(mode="before")
    @classmethod
    def _short_form(cls, value: object) -> object:
        # `github: acme/web` is the whole setting for the usual case.
        return {"repository": value} if isinstance(value, str) else value

    @pydantic.field_validator("repository")
    @classmethod
    def _owner_and_name(cls, value: str) -> str:
        if not _FULL_NAME.match(value):
            raise Invalid(
                f"{value!r} is not owner/name",
                fix="write the repository as on github.com/OWNER/NAME, e.g. `acme/web`",
            )
        return value


class GitHubSection(Section):
    api_url: str = Field(
        "https://api.github.com",
        alias="apiUrl",
        pattern=_URL,
        examples=["https://api.github.com"],
        description="GitHub's REST API (GitHub Enterprise: https://HOST/api/v3)",
    )
    web_url: str = Field(
        "https://github.com",
        alias="webUrl",
        pattern=_URL,
        examples=["https://github.com"],
        description="where people sign in (the device flow of `/harness connect github`)",
    )
    client_id: NonEmptyStr | None = Field(
        None,
        alias="clientId",
        examples=["Iv1.0123456789abcdef"],
        description="the OAuth or GitHub App client id people link their accounts with",
    )
    follow_checks: bool = Field(
        True,
        alias="followChecks",
        examples=[True],
        description="follow a pull request's checks and say in the thread how they end",
    )
    check_poll_seconds: float = Field(
        15,
        alias="checkPollSeconds",
        gt=0,
        examples=[15],
        description="how often checks are asked for at first (slower while they run long)",
    )
    auto_fix_tries: int = Field(
        0,
        alias="autoFixTries",
        ge=0,
        le=5,
        examples=[1],
        description="failed checks fixed by a developer without a click, at most this often",
    )
    draft: bool = Field(False, examples=[False], description="open pull requests as drafts")

    @pydantic.model_validator(mode="after")
    def _no_trailing_slash(self) -> Self:
        self.api_url = self.api_url.rstrip("/")
        self.web_url = self.web_url.rstrip("/")
        return self


@dataclass(frozen=True)
class GitHubAppSettings:
    app_id: int
    private_key_file: Path
    installation_id: int | None = None  # None: GitHub says, per repository


@dataclass(frozen=True)
class GitHubRepository:
    """Where a repository's pull requests are opened: ``owner/name`` on the API at
    ``api_url``, as the bot (the token in ``token_env``, or a GitHub App installation)."""

    full_name: str
    api_url: str = "https://api.github.com"
    web_url: str = "https://github.com"
    token_env: str = "GITHUB_TOKEN"
    app: GitHubAppSettings | None = None


@dataclass(frozen=True)
class GitHubSettings:
    """Shared by every GitHub repository: where the API and the sign-in are, the client id
    people link their accounts with, and how pull requests' checks are followed."""

    api_url: str = "https://api.github.com"
    web_url: str = "https://github.com"
    client_id: str | None = None
    follow_checks: bool = True
    check_poll_seconds: float = 15.0
    auto_fix_tries: int = 0
    draft: bool = False


def github_repository(
    base_dir: Path, shared: GitHubSection, raw: RepositoryGitHub
) -> GitHubRepository:
    app = raw.app
    return GitHubRepository(
        full_name=raw.repository,
        api_url=(raw.api_url or shared.api_url).rstrip("/"),
        web_url=shared.web_url,
        token_env=raw.token_env,
        app=GitHubAppSettings(
            app_id=app.id,
            private_key_file=resolve(base_dir, app.private_key_file),
            installation_id=app.installation_id,
        )
        if app
        else None,
    )


def github_settings(raw: GitHubSection) -> GitHubSettings:
    return GitHubSettings(
        api_url=raw.api_url,
        web_url=raw.web_url,
        client_id=raw.client_id,
        follow_checks=raw.follow_checks,
        check_poll_seconds=float(raw.check_poll_seconds),
        auto_fix_tries=raw.auto_fix_tries,
        draft=raw.draft,
    )
