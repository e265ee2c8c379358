"""The workspaces' values, frozen dataclasses, and the pure rules about them: the request a
host makes a workspace from, the workspace, what a task changed, where an agent's work is, a
listing's line; the task's branch and the message of the commits made for agents."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Literal

from harness.boundary.git_work import FileChange
from harness.config.settings import RepositorySettings
from harness.errors import TamperedWorkspaceError, WorkspaceError
from harness.problems import did_you_mean

BRANCH_PREFIX = "harness/"


@dataclass(frozen=True)
class WorkspaceRequest:
    """The git workspace an agent on another machine is to work in: the task's worktree of
    this repository, made there (a ``url`` repository is cloned into the machine's cache)."""

    repository: str
    url: str | None
    path: str | None
    base_branch: str
    commit_work: bool = True


@dataclass(frozen=True)
class WorkReport:
    """Where an agent's work is, as the machine that ran it saw it: the task's branch, its
    head commit, a diff stat and the full diff since the task's base."""

    branch: str | None
    head_commit: str
    diff_stat: str
    diff: str


@dataclass(frozen=True)
class Workspace:
    slug: str
    path: Path
    repository: str | None = None  # None: a scratch folder, or a repository no longer configured
    branch: str | None = None  # the branch checked out; None when detached or not git
    base_commit: str | None = None  # what changes are measured against; None: not git
    # The git directory its `.git` named when the harness made or opened it: the only one
    # the harness trusts with this worktree afterwards.
    git_dir: str | None = None

    def serves(self, repository: str | None) -> bool:
        """Whether a run asking for a worktree of ``repository`` (None: a scratch folder) may
        work here as found: a worktree must still lead to that repository and its base. One
        whose repository vanished is not served: ``Workspaces.prepare`` says why."""
        if repository is None:
            return self.repository is None and self.git_dir is None
        return (
            self.repository is not None
            and self.repository.lower() == repository.lower()
            and self.base_commit is not None
        )

    @property
    def env(self) -> dict[str, str]:
        """Variables for the processes working here: git never looks above the workspaces'
        root, so a git command in a scratch folder cannot reach an enclosing checkout."""
        return {"GIT_CEILING_DIRECTORIES": str(self.path.parent)}


@dataclass(frozen=True)
class Changes:
    """Everything a task changed relative to its base commit: commits, edits, new files."""

    branch: str | None
    head: str
    base: str
    commits: int  # commits on HEAD since the base
    uncommitted: bool  # modified, staged or untracked files not yet committed
    files: tuple[FileChange, ...]

    @property
    def insertions(self) -> int:
        return sum(change.insertions or 0 for change in self.files)

    @property
    def deletions(self) -> int:
        return sum(change.deletions or 0 for change in self.files)

    def stat(self) -> str:
        """``git diff --stat`` style: a line per file, then the totals."""
        width = max((len(change.path) for change in self.files), default=0)
        lines = [
            f" {change.path:<{width}} | "
            + (
                "Bin"
                if change.insertions is None
                else f"+{change.insertions} -{change.deletions or 0}"
            )
            for change in self.files
        ]
        return "\n".join([*lines, f" {self.summary()}"])

    def summary(self) -> str:
        """``3 files changed, 12 insertions(+), 1 deletion(-); 1 commit, uncommitted work``"""
        files = _count(len(self.files), "file") + " changed"
        ins, dels = _count(self.insertions, "insertion"), _count(self.deletions, "deletion")
        state = _count(self.commits, "commit") + (", uncommitted work" if self.uncommitted else "")
        return f"{files}, {ins}(+), {dels}(-); {state}"


def _count(number: int, noun: str) -> str:
    return f"{number} {noun}{'' if number == 1 else 's'}"


@dataclass(frozen=True)
class WorkspaceInfo:
    slug: str
    path: Path
    kind: Literal["worktree", "scratch"]
    repository: str | None  # a configured repository's name; None for scratch or unknown
    branch: str | None
    modified: datetime  # newest modification time of anything in it, UTC
    uncommitted: bool  # work prune would save to a patch (in a scratch folder: any file)
    problem: str | None = None  # why git could not read it, when it could not


class RepositoryGoneError(TamperedWorkspaceError):
    """The repository a task's worktree belongs to is gone (deleted, moved, its `.git`
    removed, cloned again): nothing of the worktree is read, committed or touched, no branch
    is claimed, and the advice keeps the work. ``missing`` says what is missing of it."""

    def __init__(self, workspace: Workspace, repo: RepositorySettings, missing: str | None) -> None:
        where = f"at {repo.path}" if repo.path else f"cloned from {repo.url} into {repo.cache}"
        WorkspaceError.__init__(
            self,
            f"task {workspace.slug!r}'s worktree at {workspace.path} belongs to repository "
            f"{repo.name!r}, which the harness cannot find any more ({where}"
            f"{f': {missing}' if missing else ''}); its files are kept as they are",
            fix=f"put the repository back {where} (or fix `workspaces.repositories.{repo.name}`"
            f" in config.yaml) and send the message again; to start the task afresh instead, "
            f"first copy what you need out of {workspace.path}: it holds the task's work",
        )


# The address of the commits the harness makes for its agents (they have no mailbox).
COMMIT_EMAIL = "harness@localhost"


def commit_message(slug: str, role: str, agent_id: str, status: str, summary: str | None) -> str:
    """``developer a1b2c3d4e5: <the result's summary, or how it ended>`` and the task."""
    subject = summary.strip().splitlines()[0] if summary and summary.strip() else None
    subject = subject or f"work left when it {status}"
    if len(subject) > 72:
        subject = subject[:71] + "…"
    return f"{role} {agent_id}: {subject}\n\nTask: {slug}\nStatus: {status}\n"


def task_branch(slug: str) -> str:
    """The branch a task's worktree works on."""
    return BRANCH_PREFIX + slug


def unknown_repository(name: str, known: list[str]) -> WorkspaceError:
    return WorkspaceError(
        f"unknown repository {name!r}; known repositories: {', '.join(known) or '(none)'}",
        fix=f"{did_you_mean(name, known)}name one of `workspaces.repositories` in config.yaml",
    )
