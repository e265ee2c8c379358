"""config.yaml's ``workspaces:`` section: where tasks work (``root``), how long an idle
workspace is kept, whether a writer's work is committed, and the repositories tasks get
worktrees of (``repository_schema``) with the default one, overall and per channel."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Self

import pydantic
from pydantic import Field

from harness.config.forge_schema import GitHubSection
from harness.config.repository_schema import (
    RepositoryEntry,
    RepositoryName,
    RepositorySettings,
    repository_settings,
    unknown_repository_error,
)
from harness.config.section import Section, resolve
from harness.config.slack_ids import ChannelId
from harness.problems import NonEmptyStr


class WorkspacesSection(Section):
    root: NonEmptyStr = Field(
        ".agents/workspaces",
        examples=[".agents/workspaces"],
        description="where each task's worktree or scratch folder is made",
    )
    prune_after_days: float = Field(
        14,
        alias="pruneAfterDays",
        gt=0,
        examples=[14],
        description="`prune` removes the workspaces of tasks idle longer than this",
    )
    commit_work: bool = Field(
        True,
        alias="commitWork",
        examples=[True],
        description="commit a writing agent's uncommitted work on the task's branch when it ends",
    )
    default: NonEmptyStr | None = Field(
        None, examples=["web"], description="the repository when a message names none"
    )
    channels: dict[ChannelId, NonEmptyStr] = Field(
        {}, examples=[{"C0123ABCD": "api"}], description="a default repository per channel id"
    )
    repositories: dict[RepositoryName, RepositoryEntry] = Field(
        {}, examples=[{"web": {"path": "../web"}}]
    )

    @pydantic.model_validator(mode="after")
    def _names_are_repositories(self) -> Self:
        named: list[tuple[tuple[str, ...], str]] = []
        if self.default is not None:
            named.append((("default",), self.default))
        named += [(("channels", channel), name) for channel, name in self.channels.items()]
        known = sorted(self.repositories)
        for at, name in named:
            if name not in self.repositories:
                instead = f"add it there, e.g. `{name}: {{path: ../{name}}}`"
                raise unknown_repository_error(name, known, instead, at=at)
        return self


@dataclass(frozen=True)
class WorkspaceSettings:
    """Where tasks work. No repositories: every task gets a scratch folder under ``root``.

    parse_config makes ``root`` absolute (under the config folder); the relative default here
    only serves a Config built by hand.
    """

    root: Path = Path(".agents/workspaces")
    prune_after_days: float = 14.0
    # Commit what a writing agent left uncommitted on the task's branch when it ends, so the
    # branch itself holds the work.
    commit_work: bool = True
    default: str | None = None  # the repository when a message names none
    channels: Mapping[str, str] = field(default_factory=dict)  # Slack channel id -> repository
    repositories: Mapping[str, RepositorySettings] = field(default_factory=dict)


def workspace_settings(
    base_dir: Path, raw: WorkspacesSection, shared: GitHubSection
) -> WorkspaceSettings:
    root = resolve(base_dir, raw.root)
    return WorkspaceSettings(
        root=root,
        prune_after_days=float(raw.prune_after_days),
        commit_work=raw.commit_work,
        default=raw.default,
        channels=dict(raw.channels),
        repositories={
            name: repository_settings(base_dir, root, name, repo, shared)
            for name, repo in raw.repositories.items()
        },
    )
