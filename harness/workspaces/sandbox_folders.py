"""The folders an agent in the OS sandbox is shown: the view path a run is shown its task's
folder at (``views.py``), and spare agents' folders made ahead there, an empty scratch
folder or a worktree (``spare_worktrees.py``), which a new task adopts."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

from harness.blocking import run_whole
from harness.tasks.common import validate_slug
from harness.workspaces.git_view import SANDBOXES, GitView
from harness.workspaces.locks import Locks
from harness.workspaces.repos import scratch_folder
from harness.workspaces.spare_moves import shown_admin
from harness.workspaces.spare_worktrees import SpareWorktrees, shown_in_view
from harness.workspaces.values import Workspace
from harness.workspaces.views import adopt_scratch, drop_view, link_view, new_view_path

logger = logging.getLogger(__name__)


class SandboxFolders:
    """View paths and spares' folders under ``root``; the worktrees among the spares'
    are ``spare_worktrees``'."""

    def __init__(self, root: Path, locks: Locks, spare_worktrees: SpareWorktrees) -> None:
        self._root = root
        self._locks = locks
        self._spare_worktrees = spare_worktrees

    async def view(self, folder: Path) -> Path:
        """A path of this run's own that links to the task's folder (``views.py``)."""
        return await asyncio.to_thread(link_view, self._root, folder)

    async def spare_folder(self, repository: str | None = None, *, writes: bool = True) -> Path:
        """A folder made ahead for a spare agent, at a view path: an empty scratch folder,
        or a worktree of ``repository`` (``spare_worktrees.py``; ``spare_git`` says what its
        sandbox shows of its git, ``writes`` false: a reader's)."""
        if repository is not None:
            made = await self._spare_worktrees.make_spare_worktree(repository, writes=writes)
            return made.view
        return await run_whole(_empty_scratch, self._root)

    def spare_git(self, view: Path) -> GitView | None:
        """What the sandbox of the spare whose folder is ``view`` shows of its git; None for
        a scratch folder."""
        spare = self._spare_worktrees.spare_worktree(view)
        return spare.git if spare is not None else None

    async def shown_in_view(self, git_view: GitView, slug: str, view: Path) -> GitView:
        """``git_view`` of task ``slug``'s worktree as shown to an agent at ``view``, the
        paths a spare's would have (``spare_worktrees.shown_in_view``)."""
        worktree, private = self._root / slug, self._root / SANDBOXES / slug
        admin = await asyncio.to_thread(shown_admin, worktree, view)
        return shown_in_view(git_view, worktree, private, view, admin)

    async def adopt_spare(self, view: Path, slug: str) -> Workspace | None:
        """A spare's folder becomes the new task ``slug``'s workspace (scratch, or the
        worktree made ahead); None when the spare does not fit it (the task has a folder
        already; for a worktree, ``adopt_spare_worktree`` says more)."""
        validate_slug(slug)
        spare = self._spare_worktrees.spare_worktree(view)
        if spare is not None:
            return await self._spare_worktrees.adopt_spare_worktree(spare, slug)
        path = self._root / slug
        async with self._locks.task(slug):
            if not await asyncio.to_thread(adopt_scratch, view, path):
                return None
        logger.info("workspace of %s: %s (scratch, made ahead)", slug, path)
        return Workspace(slug, path)

    async def drop_view(self, view: Path) -> None:
        """Removes a view: a run's link, or a spare's folder (its worktree) no task took."""
        spare = self._spare_worktrees.spare_worktree(view)
        if spare is not None:
            await self._spare_worktrees.drop_spare_worktree(spare)
        else:
            await asyncio.to_thread(drop_view, view)


def _empty_scratch(root: Path) -> Path:
    """A spare's scratch folder at a new view path under ``root``, made as a task's is
    (blocking)."""
    path = new_view_path(root)
    scratch_folder(path, new=True)
    return path
