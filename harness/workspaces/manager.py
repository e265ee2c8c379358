"""The task workspaces (``Workspaces``): preparing, committing, reporting, listing and pruning
them; the package's docstring is the whole API. Its parts, each a class of its own that
``Workspaces`` makes and hands out: ``sandbox_git`` (what a sandbox shows of a worktree's
git), ``sandbox_folders`` (view paths, spares' folders) and ``spare_worktrees``, sharing the
``known_repositories`` and the ``locks``. Its values are in ``values``; internal helpers:
``choice``, ``files``, ``prune``, ``repos`` and ``spare_moves`` (the blocking whole operations);
git runs through ``harness.git``, and over what an agent wrote (its worktree) through
``harness.boundary.git``."""

from __future__ import annotations

import asyncio
import builtins
import dataclasses
import logging
import os
from collections.abc import Collection
from datetime import UTC, datetime, timedelta
from pathlib import Path

from harness.blocking import run_whole
from harness.boundary import git as agent_git
from harness.boundary import git_work as agent_work
from harness.boundary.git_work import FileChange
from harness.clock import SYSTEM, Clock
from harness.config.settings import RepositorySettings, WorkspaceSettings
from harness.errors import (
    GitError,
    SwitchedBranchError,
    TamperedWorkspaceError,
    WorkspaceError,
)
from harness.tasks.common import SLUG_RE, validate_slug
from harness.workspaces.choice import RepositoryChoice, choose_repository
from harness.workspaces.files import (
    FolderKind,
    folder_facts,
    folder_kind,
    remove_trees,
    touch,
    worktree_admin_dir,
    worktree_dirs,
)
from harness.workspaces.git_view import SANDBOXES, GitView
from harness.workspaces.known_repositories import KnownRepositories
from harness.workspaces.locks import Locks
from harness.workspaces.prune import Kept, Pruner, PruneReport, Removed
from harness.workspaces.repos import (
    add_task_worktree,
    populated,
    scratch_folder,
)
from harness.workspaces.sandbox_folders import SandboxFolders
from harness.workspaces.sandbox_git import SandboxGit
from harness.workspaces.spare_worktrees import SpareWorktrees
from harness.workspaces.values import (
    BRANCH_PREFIX,
    COMMIT_EMAIL,
    Changes,
    RepositoryGoneError,
    WorkReport,
    Workspace,
    WorkspaceInfo,
    WorkspaceRequest,
    commit_message,
    task_branch,
    unknown_repository,
)
from harness.workspaces.views import prune_views

__all__ = [
    "Changes",
    "FileChange",
    "GitError",
    "GitView",
    "Kept",
    "PruneReport",
    "Removed",
    "RepositoryChoice",
    "RepositoryGoneError",
    "SandboxFolders",
    "SandboxGit",
    "TamperedWorkspaceError",
    "WorkReport",
    "Workspace",
    "WorkspaceError",
    "WorkspaceInfo",
    "WorkspaceRequest",
    "Workspaces",
    "choose_repository",
    "commit_message",
    "task_branch",
    "unknown_repository",
]

logger = logging.getLogger(__name__)

# Listing runs a few git commands per workspace: enough at once to hide their latency, few
# enough not to fork hundreds of processes.
_LIST_CONCURRENCY = 8
# Under the root: the CLI's own files for runs outside the OS sandbox, per task and agent.
CLI_STATE = ".cli"


class Workspaces:
    """The task workspaces under ``settings.root``, with the parts agents in the OS sandbox
    need: ``sandbox_git`` and ``sandbox_folders`` (a caller keeps the one it uses).
    ``clock`` says when a repository was fetched, what is old enough to prune and the
    patches' stamps."""

    def __init__(self, settings: WorkspaceSettings, clock: Clock = SYSTEM) -> None:
        self._settings = settings
        self.root = settings.root
        self._clock = clock
        self._locks = Locks()
        self._repositories = KnownRepositories(settings.repositories, clock)
        self.sandbox_git = SandboxGit(self.root, self._locks, self._repositories)
        self._spare_worktrees = SpareWorktrees(self.root, self._locks, self._repositories, clock)
        self.sandbox_folders = SandboxFolders(self.root, self._locks, self._spare_worktrees)

    @property
    def settings(self) -> WorkspaceSettings:
        """The settings, with the repositories learnt since (``add_repository``)."""
        return dataclasses.replace(self._settings, repositories=self._repositories.all)

    def add_repository(self, repo: RepositorySettings) -> None:
        """Makes ``repo`` known: a worker learns the repositories from the runs it takes."""
        self._repositories.add(repo)

    # --- preparing ------------------------------------------------------------------------

    async def prepare(self, slug: str, repository: str | None) -> Workspace:
        """The task's workspace: a worktree of ``repository``, or a scratch folder for None.
        A task that has one gets it again (a follow-up)."""
        validate_slug(slug)
        asked = self._clock.monotonic()
        repo = self._repositories.get(repository) if repository is not None else None
        path = self.root / slug
        async with self._locks.task(slug):
            kind = await asyncio.to_thread(folder_kind, path)
            if kind == "missing" and repo is not None:
                workspace = await self._create(slug, path, repo, asked)
            elif kind == "missing" or (kind == "scratch" and repo is None):
                await run_whole(scratch_folder, path, new=kind == "missing")
                workspace = Workspace(slug, path)
            elif kind == "worktree":
                workspace = await self._open(slug, path)
                if workspace.repository is None and repo is not None:
                    raise await self._repositories.gone(workspace, repo)
                if repo is None or workspace.repository != repo.name:
                    raise self._mismatch(slug, kind, workspace.repository, repository)
                # Its agents wrote it: filled, if a crash left it empty, by the boundary's git.
                await agent_work.fill(await self._tree(workspace), task_branch(slug))
                await asyncio.to_thread(touch, path)
            else:
                raise self._mismatch(slug, kind, None, repository)
        logger.info("workspace of %s: %s (%s)", slug, path, repository or "scratch")
        return workspace

    async def find(self, slug: str) -> Workspace | None:
        """The workspace the task has, or None."""
        validate_slug(slug)
        path = self.root / slug
        kind = await asyncio.to_thread(folder_kind, path)
        if kind == "worktree":
            return await self._open(slug, path)
        return Workspace(slug, path) if kind == "scratch" else None

    def _mismatch(
        self, slug: str, kind: FolderKind, has: str | None, wanted: str | None
    ) -> WorkspaceError:
        what = {
            "worktree": f"a worktree of {has!r}" if has else "a worktree",
            "scratch": "a scratch folder",
        }.get(kind, "not a folder the harness made")
        asked = f"a worktree of {wanted!r}" if wanted else "a scratch folder"
        return WorkspaceError(
            f"task {slug!r} already has a workspace at {self.root / slug}: {what}, not {asked}",
            fix="a task keeps the workspace it started with: start a new task (thread) for "
            "other work; the folder holds this task's work, so move it aside (never just "
            "delete it) if this task must start afresh",
        )

    async def _create(
        self, slug: str, path: Path, repo: RepositorySettings, asked: float
    ) -> Workspace:
        branch = task_branch(slug)
        async with self._locks.repository(repo.name):
            source = await self._repositories.source(repo, asked)
            base_commit = await run_whole(add_task_worktree, source, repo, path, branch)
        # Checking files out touches this worktree alone: other tasks need not wait for it.
        git_dir = await run_whole(populated, path)
        return Workspace(slug, path, repo.name, branch, base_commit, git_dir)

    async def _open(self, slug: str, path: Path) -> Workspace:
        (common, git_dir), branch = await asyncio.gather(
            asyncio.to_thread(worktree_dirs, path), self._head_branch(path)
        )
        repository = await self._repositories.name_of(common) if common is not None else None
        # Read in the repository, where it was recorded: never by git in the worktree, whose
        # `.git` and admin folder its agents may have rewritten.
        base = await self._repositories.stored_base(repository, BRANCH_PREFIX + slug)
        return Workspace(slug, path, repository, branch, base, git_dir)

    async def _head_branch(self, path: Path) -> str | None:
        """The worktree's branch; None when detached or when its git cannot be trusted (a
        report then says why)."""
        try:
            return await agent_work.head_branch(await agent_git.confine(path, root=self.root))
        except WorkspaceError as exc:
            logger.warning("%s", exc.message)
            return None

    async def _tree(self, workspace: Workspace) -> agent_git.Tree:
        """The worktree's git, checked (``boundary.git.confine``): TamperedWorkspaceError
        when it cannot be trusted."""
        try:
            return await agent_git.confine(workspace.path, root=self.root)
        except agent_git.UntrustedGitError as exc:
            gone = await self._repositories.vanished(workspace)
            raise gone or TamperedWorkspaceError(workspace, None, why=exc.reason) from exc

    async def commit(self, workspace: Workspace, message: str, *, author: str) -> str | None:
        """Commit what is uncommitted in a worktree on its branch (``commitWork``); the new
        commit, or None when there was nothing to commit, it is a scratch folder or commits
        are turned off."""
        return (await self._commit(workspace, message, author=author)).commit

    async def _commit(
        self,
        workspace: Workspace,
        message: str,
        *,
        author: str,
        tree: agent_git.Tree | None = None,
    ) -> agent_work.Committed:
        """``tree``: the worktree's git, when the caller checked it already."""
        if workspace.base_commit is None or not self._settings.commit_work:
            return agent_work.Committed(None)
        async with self._locks.task(workspace.slug):
            tree = tree or await self._tree(workspace)
            # The commit's objects go to the task's own store: other tasks never see them.
            objects = await self.sandbox_git.objects_env(workspace)
            if objects:
                tree = dataclasses.replace(tree, objects=tuple(objects.items()))
            return await agent_work.commit_all(tree, message, author=author, email=COMMIT_EMAIL)

    async def report(
        self, workspace: Workspace, *, commit: str | None, author: str
    ) -> WorkReport | None:
        """Where the work in ``workspace`` is: the branch, head, diff stat and full diff since
        the task's base; with ``commit`` (a message), uncommitted work is committed first.
        None for a scratch folder. TamperedWorkspaceError when its ``.git`` no longer names
        the git directory it had: nothing in it is read or committed then. Nested git
        repositories are never committed nor read: the stat names each, left where it is."""
        if workspace.git_dir is not None:
            now = await asyncio.to_thread(worktree_admin_dir, workspace.path)
            if now != workspace.git_dir:  # its repository gone, or its `.git` rewritten
                gone = await self._repositories.vanished(workspace)
                raise gone or TamperedWorkspaceError(workspace, now)
        if workspace.base_commit is None:
            return None
        tree = await self._tree(workspace)
        if workspace.branch is not None:
            head = await agent_work.head_branch(tree)
            if head != workspace.branch:
                raise SwitchedBranchError(workspace, head)
        left_out: tuple[str, ...] | None = None
        if commit is not None and self._settings.commit_work:
            committed = await self._commit(workspace, commit, author=author, tree=tree)
            left_out = committed.left_out
        if left_out is None:
            left_out = await agent_work.nested(tree, added_only=True)
        # The worktree's git checked once above serves every read of the report.
        changes = await self._changes(tree, workspace.base_commit)
        diff = await self._patch(tree, workspace.base_commit) if changes.files else ""
        stat = "\n".join([changes.stat(), *nested_notes(workspace.path, left_out)])
        return WorkReport(changes.branch, changes.head, stat, diff)

    # --- reading --------------------------------------------------------------------------

    async def changes(self, workspace: Workspace) -> Changes | None:
        """What the task changed since its base commit; None for a scratch folder."""
        if workspace.base_commit is None:
            return None
        return await self._changes(await self._tree(workspace), workspace.base_commit)

    async def _changes(self, tree: agent_git.Tree, base: str) -> Changes:
        files, head, branch, uncommitted, commits = await asyncio.gather(
            agent_work.diff_files(tree, base),
            agent_git.run(tree, "rev-parse", "HEAD"),
            agent_work.head_branch(tree),
            agent_work.has_uncommitted_work(tree),
            agent_git.run(tree, "rev-list", "--count", f"{base}..HEAD"),
        )
        return Changes(branch, head.text, base, int(commits.text), uncommitted, files)

    async def patch(self, workspace: Workspace) -> str:
        """Every change since the base commit as one patch, untracked files included (UTF-8,
        undecodable bytes replaced; prune's patch files are byte-exact); "" for scratch."""
        if workspace.base_commit is None:
            return ""
        return await self._patch(await self._tree(workspace), workspace.base_commit)

    async def _patch(self, tree: agent_git.Tree, base: str) -> str:
        return (await agent_work.diff_patch(tree, base)).decode("utf-8", "replace")

    async def list(self) -> builtins.list[WorkspaceInfo]:
        """Every workspace under root, by slug."""
        limit = asyncio.Semaphore(_LIST_CONCURRENCY)

        async def info(slug: str) -> WorkspaceInfo | None:
            async with limit:
                return await self._info(slug)

        found = await asyncio.gather(*(info(slug) for slug in await self._slugs()))
        return [item for item in found if item is not None]

    async def _slugs(self) -> builtins.list[str]:
        def names() -> builtins.list[str]:
            try:
                return sorted(entry.name for entry in os.scandir(self.root))
            except FileNotFoundError:
                return []

        # Dot folders (.repos, .patches, .sandbox, .cli, .views) never match a slug.
        return [name for name in await asyncio.to_thread(names) if SLUG_RE.match(name)]

    async def _info(self, slug: str) -> WorkspaceInfo | None:
        path = self.root / slug
        kind, mtime, scratch_dirty = await asyncio.to_thread(folder_facts, path)
        if mtime is None or (kind != "worktree" and kind != "scratch"):
            return None
        modified = datetime.fromtimestamp(mtime, UTC)
        if kind == "scratch":
            dirty = bool(scratch_dirty)
            return WorkspaceInfo(slug, path, kind, None, None, modified, dirty)
        try:
            workspace = await self._open(slug, path)
            dirty = await agent_work.has_uncommitted_work(
                await agent_git.confine(path, root=self.root)
            )
        except WorkspaceError as exc:
            return WorkspaceInfo(slug, path, kind, None, None, modified, True, exc.message)
        return WorkspaceInfo(
            slug, path, kind, workspace.repository, workspace.branch, modified, dirty
        )

    # --- pruning --------------------------------------------------------------------------

    async def prune(
        self,
        older_than: timedelta | None = None,
        *,
        keep: Collection[str] = (),
        dry_run: bool = False,
    ) -> PruneReport:
        """Remove the workspaces idle longer than ``older_than`` (default: the configured
        ``pruneAfterDays``), saving uncommitted work to patch files first. ``keep`` names
        tasks whose workspaces stay whatever their age (those with agents running).
        ``dry_run``: only report what would be removed and kept; nothing changes."""
        age = older_than if older_than is not None else timedelta(self._settings.prune_after_days)
        # Compared with files' modification times: the clock's wall time.
        cutoff = self._clock.now().timestamp() - age.total_seconds()
        pruner = Pruner(self.root, cutoff=cutoff, dry_run=dry_run, clock=self._clock)
        outcomes: builtins.list[Removed | Kept] = []
        for slug in await self._slugs():
            if slug in keep:
                outcomes.append(Kept(slug, "in use", "the task is active"))
                continue
            async with self._locks.task(slug):
                outcome = await pruner.prune(slug)
                if isinstance(outcome, Removed) and not dry_run:
                    # Its sandbox's git (made again for a new run): the objects in it were
                    # brought into the repository when its agents' runs were settled.
                    await asyncio.to_thread(
                        remove_trees, self.root / SANDBOXES / slug, self.cli_state(slug)
                    )
                outcomes.append(outcome)
        await pruner.finish()
        if not dry_run:  # what a harness stopped mid-run left
            await asyncio.to_thread(prune_views, self.root, cutoff)
            await self._spare_worktrees.prune_spare_leftovers(cutoff)
        report = PruneReport.of(outcomes, pruner.patches, dry_run=dry_run)
        logger.info("pruned %d workspace(s), kept %d", len(report.removed), len(report.kept))
        return report

    def cli_state(self, slug: str, agent_id: str | None = None) -> Path:
        """Where the CLI of an agent on task ``slug`` keeps what it writes when it runs
        outside the OS sandbox (its host removes it after the run; prune, a crash's
        leftovers)."""
        folder = self.root / CLI_STATE / slug
        return folder / agent_id if agent_id else folder


def nested_notes(worktree: Path, left_out: Collection[str]) -> builtins.list[str]:
    """A line of a report for each nested git repository the harness did not commit. Pure."""
    return [
        f" {path}/: a git repository of its own, not committed (the harness does not look "
        f"inside one); its files are still in {worktree / path}"
        for path in left_out
    ]
