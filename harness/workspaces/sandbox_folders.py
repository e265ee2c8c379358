"""The parts of ``Workspaces`` about agents in the OS sandbox: what a sandbox shows of a
worktree's git (``git_view.py``, ``git_shown.py``: its own task's alone) and brings back from
it (``git_settle.py``, into the task's object store, ``git_stores.py``), the view paths
a sandboxed agent is shown its workspace at and spare agents' folders made ahead
(``views.py``; worktrees, ``spare_worktrees.py``), and where the CLI keeps its own files for
a run outside the sandbox. Mixed into ``Workspaces``; callers use them there."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

from harness.tasks.common import validate_slug
from harness.workspaces.files import folder_kind, touch, worktree_admin_dir
from harness.workspaces.git import WorkspaceError, git
from harness.workspaces.git_stores import ensure_store, store_env
from harness.workspaces.git_view import SANDBOXES, GitView, close_view, open_view, view_ahead
from harness.workspaces.spare_worktrees import SpareWorktrees, shown_in_view, write_gitdir_file
from harness.workspaces.values import Workspace
from harness.workspaces.views import adopt_view, drop_view, empty_view, link_view

logger = logging.getLogger(__name__)

# Under the root: the CLI's own files for runs outside the OS sandbox, per task and agent.
CLI_STATE = ".cli"


class SandboxFolders(SpareWorktrees):
    """Mixed into ``Workspaces``, whose parts these are."""

    root: Path

    # --- the agents' sandboxes --------------------------------------------------------------

    async def sandbox_view(self, workspace: Workspace, *, writes: bool = True) -> GitView | None:
        """What the OS sandbox of an agent in ``workspace`` must show of its git, the
        repository itself read-only (``git_view.open_view``; ``writes`` false: a reader's,
        all read-only); None for a scratch folder."""
        dirs = await self._sandbox_dirs(workspace)
        if dirs is None:
            return None
        async with self._lock(f"task:{workspace.slug}"):
            return await open_view(workspace, *dirs, writes=writes)

    async def sandbox_view_ahead(self, workspace: Workspace, *, writes: bool) -> GitView | None:
        """What ``sandbox_view`` will show, for a sandbox started before its run
        (``git_view.view_ahead``): ``sandbox_view`` at dispatch fills it."""
        dirs = await self._sandbox_dirs(workspace)
        if dirs is None:
            return None
        async with self._lock(f"task:{workspace.slug}"):
            return await view_ahead(workspace, *dirs, writes=writes)

    async def settle_sandbox_view(self, workspace: Workspace) -> None:
        """Bring what a writer's agent committed in its sandbox into the repository: its
        objects, and its branch moved (``git_view.close_view``); nothing for a scratch
        folder. Before ``commit`` or ``report``, which need those objects."""
        dirs = await self._sandbox_dirs(workspace)
        if dirs is not None:
            async with self._lock(f"task:{workspace.slug}"):
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
        found = await self._common_dir(name, self._repository(name))
        if found is None:
            raise WorkspaceError(
                f"repository {name!r} of task {workspace.slug} is gone",
                fix="restore it, or prepare the task again",
            )
        return found, self.root / SANDBOXES / workspace.slug

    # --- views (what a sandboxed agent is shown its scratch folder as) -------------------

    async def view(self, folder: Path) -> Path:
        """A path of this run's own that links to the task's folder (``views.py``)."""
        return await asyncio.to_thread(link_view, self.root, folder)

    async def spare_folder(self, repository: str | None = None, *, writes: bool = True) -> Path:
        """A folder made ahead for a spare agent, at a view path: an empty scratch folder,
        or a worktree of ``repository`` (``spare_worktrees.py``; ``spare_git`` says what its
        sandbox shows of its git, ``writes`` false: a reader's)."""
        if repository is not None:
            return (await self.make_spare_worktree(repository, writes=writes)).view
        path = await asyncio.to_thread(empty_view, self.root)
        await git("init", "--quiet", cwd=path)
        return path

    def spare_git(self, view: Path) -> GitView | None:
        """What the sandbox of the spare whose folder is ``view`` shows of its git; None for
        a scratch folder."""
        spare = self.spare_worktree(view)
        return spare.git if spare is not None else None

    async def shown_in_view(self, git_view: GitView, slug: str, view: Path) -> GitView:
        """``git_view`` of task ``slug``'s worktree as shown to an agent at ``view``, the
        paths a spare's would have (``spare_worktrees.shown_in_view``)."""
        worktree, private = self.root / slug, self.root / SANDBOXES / slug
        admin = await asyncio.to_thread(worktree_admin_dir, worktree)
        await asyncio.to_thread(write_gitdir_file, view)
        admin_path = Path(admin) if admin is not None else None
        return shown_in_view(git_view, worktree, private, view, admin_path)

    async def adopt_spare(self, view: Path, slug: str) -> Workspace | None:
        """A spare's folder becomes the new task ``slug``'s workspace (scratch, or the
        worktree made ahead); None when the spare does not fit it (the task has a folder
        already; for a worktree, ``adopt_spare_worktree`` says more)."""
        validate_slug(slug)
        spare = self.spare_worktree(view)
        if spare is not None:
            return await self.adopt_spare_worktree(spare, slug)
        path = self.root / slug
        async with self._lock(f"task:{slug}"):
            if await asyncio.to_thread(folder_kind, path) != "missing":
                return None
            await asyncio.to_thread(adopt_view, view, path)
            await asyncio.to_thread(touch, path)
        logger.info("workspace of %s: %s (scratch, made ahead)", slug, path)
        return Workspace(slug, path)

    async def drop_view(self, view: Path) -> None:
        """Removes a view: a run's link, or a spare's folder (its worktree) no task took."""
        spare = self.spare_worktree(view)
        if spare is not None:
            await self.drop_spare_worktree(spare)
        else:
            await asyncio.to_thread(drop_view, view)

    def cli_state(self, slug: str, agent_id: str | None = None) -> Path:
        """Where the CLI of an agent on task ``slug`` keeps what it writes when it runs
        outside the OS sandbox (its host removes it after the run; prune, a crash's
        leftovers)."""
        folder = self.root / CLI_STATE / slug
        return folder / agent_id if agent_id else folder
