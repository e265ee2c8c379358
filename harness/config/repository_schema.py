"""A repository under config.yaml's ``workspaces.repositories``: a local git repository
(``path``) or one the harness clones (``url``, into ``cache``), the branch tasks start from,
where their branches are pushed and where their pull requests are opened (``github``)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Self

import pydantic
from pydantic import Field

from harness.config.forge_schema import (
    GitHubRepository,
    GitHubSection,
    RepositoryGitHub,
    github_repository,
)
from harness.config.section import Section, resolve
from harness.problems import Invalid, NonEmptyStr, did_you_mean

# Repository names become folder names and the `repo:NAME` token people type: plain words.
_REPOSITORY_NAME = re.compile(r"^[a-z0-9][a-z0-9_-]{0,63}$")
# What git's check-ref-format refuses in a branch name; a leading "-" would read as an option.
_BAD_BRANCH = re.compile(r"^[-/.]|[\s~^:?*\[\\]|\.\.|@\{|//|/\.|[/.]$|\.lock$")


def _repository_name(value: str) -> str:
    if not _REPOSITORY_NAME.match(value):
        plain = re.sub(r"[^a-z0-9_-]+", "-", value.lower()).strip("-_")[:64]
        hint = f"did you mean {plain!r}? " if _REPOSITORY_NAME.match(plain) else ""
        raise Invalid(
            f"invalid repository name {value!r}",
            fix=f"{hint}use lowercase letters, digits, `-` and `_` (at most 64, starting with a "
            "letter or digit)",
            with_example=True,
        )
    return value


def _branch_name(value: str) -> str:
    if _BAD_BRANCH.search(value):
        raise Invalid(
            f"{value!r} is not a valid git branch name",
            fix="name an existing branch of the repository",
            with_example=True,
        )
    return value


def _not_an_option(value: str) -> str:
    if value.startswith("-"):  # git would read it as an option
        raise Invalid(f"{value!r} starts with '-'", fix="write the address", with_example=True)
    return value


RepositoryName = Annotated[str, pydantic.AfterValidator(_repository_name)]
BranchName = Annotated[NonEmptyStr, pydantic.AfterValidator(_branch_name)]
GitUrl = Annotated[NonEmptyStr, pydantic.AfterValidator(_not_an_option)]


def unknown_repository_error(
    name: str, known: list[str], instead: str, *, at: tuple[str, ...]
) -> Invalid:
    """A name that is not one of ``workspaces.repositories`` (``known``); ``instead``: the
    other way out, said after naming one of them."""
    return Invalid(
        f"unknown repository {name!r}; known repositories: "
        f"{', '.join(known) or '(none configured)'}",
        fix=f"{did_you_mean(name, known)}name one of `workspaces.repositories`, or {instead}",
        at=at,
    )


class RepositoryEntry(Section):
    path: NonEmptyStr | None = Field(
        None, examples=["../web"], description="a local git repository; tasks get worktrees of it"
    )
    url: GitUrl | None = Field(
        None,
        examples=["https://git.example.com/api.git"],
        description="a repository the harness clones into `cache` and fetches for each new task",
    )
    cache: NonEmptyStr | None = Field(
        None,
        examples=[".agents/repos/api"],
        description="where the clone of `url` is kept; default <root>/.repos/<name>",
    )
    base_branch: BranchName = Field(
        "main", alias="baseBranch", examples=["main"], description="what task branches start from"
    )
    remote: NonEmptyStr = Field(
        "origin",
        examples=["origin"],
        description="the git remote a `path` repository's task branches are pushed to",
    )
    github: RepositoryGitHub | None = Field(
        None,
        examples=["acme/web"],
        description="open pull requests of this repository's tasks on GitHub",
    )

    @pydantic.model_validator(mode="after")
    def _one_source(self) -> Self:
        either = "`path:` (a local git repository) or `url:` (one the harness clones)"
        if self.path is not None and self.url is not None:
            raise Invalid("sets both `path` and `url`", fix=f"keep only one: {either}")
        if self.path is None and self.url is None:
            raise Invalid(
                "needs `path` or `url`",
                fix=f"add {either}, e.g. `{{path: ../web}}` or "
                "`{url: 'https://git.example.com/api.git'}`",
            )
        if self.path is not None and self.cache is not None:
            raise Invalid(
                "`cache` is only for a `url` repository",
                fix="remove `cache:`: a `path` repository is used where it is",
                at=("cache",),
            )
        return self


@dataclass(frozen=True)
class RepositorySettings:
    """A git repository tasks get worktrees of: a local one at ``path``, or ``url`` cloned
    into ``cache`` (exactly one of ``path`` and ``url`` is set; ``cache`` goes with ``url``).
    Task branches are pushed to ``remote`` (a ``path`` repository's) or ``url``."""

    name: str
    path: Path | None = None
    url: str | None = None
    cache: Path | None = None
    base_branch: str = "main"
    remote: str = "origin"
    github: GitHubRepository | None = None

    @property
    def folder(self) -> Path | None:
        """Its git repository here: ``path``, or the clone in ``cache``."""
        return self.path or self.cache


def repository_settings(
    base_dir: Path, root: Path, name: str, raw: RepositoryEntry, shared: GitHubSection
) -> RepositorySettings:
    """``root``: the workspaces' root, under which a `url` repository's cache is by default."""
    github = github_repository(base_dir, shared, raw.github) if raw.github else None
    if raw.path is not None:
        path = resolve(base_dir, raw.path)
        return RepositorySettings(
            name=name, path=path, base_branch=raw.base_branch, remote=raw.remote, github=github
        )
    # A dot folder under root: never a valid task slug, so it never passes for a workspace.
    cache = resolve(base_dir, raw.cache) if raw.cache else root / ".repos" / name
    return RepositorySettings(
        name=name, url=raw.url, cache=cache, base_branch=raw.base_branch, github=github
    )
