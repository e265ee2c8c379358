"""What the OS sandbox of an agent in a task's worktree is shown of its git
(``git_view.py``, ``git_shown.py``: its own task's alone), and what is brought back from it
(``git_settle.py``, into the task's object store, ``git_stores.py``)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from harness.errors import WorkspaceError
from harness.workspaces.git_stores import ensure_store, store_env
from harness.workspaces.git_view import SANDBOXES, GitView, close_view, open_view, view_ahead
from harness.workspaces.known_repositories import KnownRepositories
from harness.workspaces.locks import Locks
from harness.workspaces.values import Workspace


class SandboxGit:
    """The git views of the worktrees under ``root``, of the ``repositories`` they belong to."""

    def __init__(self, root: Path, locks: Locks, repositories: KnownRepositories) -> None:
        self._root = root
        self._locks = locks
        self._repositories = repositories

    async def sandbox_view(self, workspace: Workspace, *, writes: bool = True) -> GitView | None:
        """What the OS sandbox of an agent in ``workspace`` must show of its git, the
        repository itself read-only (``git_view.open_view``; ``writes`` false: a reader's,
        all read-only); None for a scratch folder."""
        dirs = await self._sandbox_dirs(workspace)
        if dirs is None:
            return None
        async with self._locks.task(workspace.slug):
            return await open_view(workspace, *dirs, writes=writes)

    async def sandbox_view_ahead(self, workspace: Workspace, *, writes: bool) -> GitView | None:
        """What ``sandbox_view`` will show, for a sandbox started before its run
        (``git_view.view_ahead``): ``sandbox_view`` at dispatch fills it."""
        dirs = await self._sandbox_dirs(workspace)
        if dirs is None:
            return None
        async with self._locks.task(workspace.slug):
            return await view_ahead(workspace, *dirs, writes=writes)

    async def settle_sandbox_view(self, workspace: Workspace) -> None:
        """Bring what a writer's agent committed in its sandbox into the repository: its
        objects, and its branch moved (``git_view.close_view``); nothing for a scratch
        folder. Before ``commit`` or ``report``, which need those objects."""
        dirs = await self._sandbox_dirs(workspace)
        if dirs is not None:
            async with self._locks.task(workspace.slug):
                await close_view(workspace, *dirs)

    async def objects_env(self, workspace: Workspace) -> dict[str, str] | None:
        """The environment for git the harness runs over ``workspace``'s worktree that
        writes objects (committing what its agent left): into the task's own store, which
        the repository reaches and no other task's sandbox is shown (``git_stores``); None
        for a scratch folder."""
        dirs = await self._sandbox_dirs(workspace)
        if dirs is None:
            return None
        await asyncio.to_thread(ensure_store, dirs[0], workspace.slug)
        return store_env(dirs[0], workspace.slug)

    async def _sandbox_dirs(self, workspace: Workspace) -> tuple[Path, Path] | None:
        """The git directory of the worktree's repository, found from the configuration
        (never from the worktree, whose ``.git`` links its agent can rewrite), and the
        task's private folder for its sandbox's git."""
        if workspace.git_dir is None:
            return None
        name = workspace.repository
        if name is None:
            raise WorkspaceError(
                f"task {workspace.slug}'s worktree belongs to no configured repository",
                fix="configure its repository again in `workspaces.repositories`",
            )
        gone = await self._repositories.vanished(workspace)
        if gone is not None:
            raise gone
        found = await self._repositories.common_dir(name, self._repositories.get(name))
        if found is None:
            raise WorkspaceError(
                f"repository {name!r} of task {workspace.slug} is gone",
                fix="restore it, or prepare the task again",
            )
        return found, self._root / SANDBOXES / workspace.slug
