"""Spare worktrees: a worktree of a repository made ahead for a spare agent (``runtime/
spares.py``), which the first agent of a new task in that repository adopts.

A spare worktree is made at a view path (``views.py``, ``<root>/.views/<id>``) on a
placeholder branch ``harness/_<id>`` from the base branch's head, its files checked out, with
its private folder P (``git_view.py``) made ahead at ``<root>/.sandbox/_<id>`` and its git
view opened, so the spare's CLI starts in its sandbox as any agent's would. No slug starts
with ``_``, so no task's branch or folder can be taken by a spare's.

At dispatch, when the base branch has not moved since, the task adopts it: the placeholder
branch becomes ``harness/<slug>`` (the worktree's HEAD with it), the folder moves to
``<root>/<slug>`` with the view path left as a link to it, the worktree's admin folder is
told where it went, P moves to ``<root>/.sandbox/<slug>``, its ref and reflog renamed, and
the spare's object store in the repository (``git_stores``) becomes the task's.
The sandbox already running keeps its binds: bubblewrap mounted the folders themselves, not
their names. An agent started cold is shown its worktree and P at paths of the same shapes
(:func:`shown_in_view`), so the two look the same from inside.

Making, taking and dropping one are each a whole blocking operation (``spare_moves``) run in
one worker thread under the task's and the repository's locks.
"""

from __future__ import annotations

import logging
from dataclasses import replace
from pathlib import Path

from harness.blocking import run_whole
from harness.clock import SYSTEM, Clock
from harness.errors import HarnessError, WorkspaceError
from harness.sandbox.layout import Bind
from harness.workspaces.git_view import SANDBOXES, GitView, open_view
from harness.workspaces.known_repositories import KnownRepositories
from harness.workspaces.locks import Locks
from harness.workspaces.repos import populate
from harness.workspaces.spare_moves import (
    SpareWorktree,
    add_spare_worktree,
    drop_spare_folders,
    placeholder,
    prune_repository_spares,
    prune_spare_privates,
    take_spare,
    unregister_spare,
    write_gitdir_file,
)
from harness.workspaces.values import BRANCH_PREFIX, Workspace, task_branch
from harness.workspaces.views import gitdir_file, new_view_path

__all__ = ["SpareWorktree", "SpareWorktrees", "placeholder"]

logger = logging.getLogger(__name__)


def renamed_branch_note(view: Path, branch: str) -> str:
    """What the first agent on the spare made at ``view`` is told of its branch, after its
    task adopted the spare: its CLI read git's status while it waited, under the placeholder's
    name, and says that name to the model (pure)."""
    return (
        f"(Your work is on git branch `{branch}`. The git status at the start of this "
        f"conversation names `{BRANCH_PREFIX}{placeholder(view)}`: the same branch, read "
        "before it was renamed for this task.)"
    )


def private_shown(view: Path) -> Path:
    """Where an agent shown its worktree at ``view`` is shown its private folder P: a path
    of the spare's shape, whichever task it works for (pure)."""
    return view.parent.parent / SANDBOXES / placeholder(view)


def shown_in_view(
    git_view: GitView, worktree: Path, private: Path, view: Path, admin: Path | None
) -> GitView:
    """``git_view`` of the worktree at ``worktree`` (its private folder ``private``, its
    admin folder ``admin``) as an agent shown the worktree at ``view`` sees it: the same
    folders, at the paths a spare's are at (pure)."""
    moves = ((str(worktree), str(view)), (str(private), str(private_shown(view))))

    def moved(path: str) -> str:
        for old, new in moves:
            if path == old or path.startswith(old + "/"):
                return new + path[len(old) :]
        return path

    binds = tuple(Bind(b.source, moved(b.target), b.writable) for b in git_view.binds)
    env = dict(git_view.env)
    if "GIT_OBJECT_DIRECTORY" in env:
        env["GIT_OBJECT_DIRECTORY"] = moved(env["GIT_OBJECT_DIRECTORY"])
    return with_gitdir(GitView(binds, env), admin, view)


def with_gitdir(git_view: GitView, admin: Path | None, view: Path) -> GitView:
    """``git_view`` with the admin folder's link back to the worktree shown as ``view``'s:
    the CLI takes a worktree for one only when that link leads to its own folder (else it
    tells the agent something else, and keeps its memory elsewhere). The file shown is
    ``views.gitdir_file``; nothing when ``admin`` is not among the folders shown (pure)."""
    if admin is None or not any(b.target == str(admin) for b in git_view.binds):
        return git_view
    shown = Bind(str(gitdir_file(view)), str(admin / "gitdir"), False)
    return GitView((*git_view.binds, shown), git_view.env)


class SpareWorktrees:
    """The spare worktrees under ``root``, of the ``repositories``, made and not yet taken."""

    def __init__(
        self, root: Path, locks: Locks, repositories: KnownRepositories, clock: Clock = SYSTEM
    ) -> None:
        self._root = root
        self._locks = locks
        self._repositories = repositories
        self._clock = clock
        self._spares: dict[Path, SpareWorktree] = {}  # view path -> the spare made there

    async def make_spare_worktree(self, repository: str, *, writes: bool) -> SpareWorktree:
        """A worktree of ``repository`` for a spare, from its base branch's head as a new
        task's would be, with its sandbox's git view opened (``writes`` false: a reader's)."""
        repo = self._repositories.get(repository)
        view = new_view_path(self._root)  # a name only: nothing is made there yet
        async with self._locks.repository(repo.name):
            source = await self._repositories.source(repo, self._clock.monotonic())
            base, admin = await run_whole(add_spare_worktree, source, repo, view)
        private = self._root / SANDBOXES / placeholder(view)
        spare = SpareWorktree(view, repo.name, source, base, admin, private, GitView((), {}))
        try:
            await run_whole(_filled, spare)
            common = await self._repositories.common_dir(repo.name, repo)
            if common is None:
                raise WorkspaceError(
                    f"repository {repo.name!r} has no git directory at {source}",
                    fix=f"check `workspaces.repositories.{repo.name}` in config.yaml",
                )
            workspace = Workspace(spare.name, view, repo.name, spare.branch, base, str(admin))
            opened = await open_view(workspace, common, private, writes=writes)
            spare = replace(spare, git=with_gitdir(opened, admin, view))
        except BaseException:
            await self.drop_spare_worktree(spare)
            raise
        self._spares[view] = spare
        logger.info("a spare worktree of %s is ready at %s", repo.name, view)
        return spare

    def spare_worktree(self, view: Path) -> SpareWorktree | None:
        return self._spares.get(view)

    async def adopt_spare_worktree(self, spare: SpareWorktree, slug: str) -> Workspace | None:
        """The spare worktree becomes the new task ``slug``'s workspace, as ``prepare`` would
        have made it; None when it does not fit: the task has a folder, branch or private
        folder already, the spare's folder went, or the base branch moved since it was made
        (the spare is then closed by its caller, a replacement made)."""
        repo = self._repositories.get(spare.repository)
        asked = self._clock.monotonic()
        async with self._locks.task(slug):
            try:
                async with self._locks.repository(spare.repository):
                    if repo.url is not None:  # fetched, as a new task's repository is
                        await self._repositories.source(repo, asked)
                    # A local repository gone since fails the take, and the cold start
                    # that follows says what is missing.
                    taken = await run_whole(take_spare, spare, repo, self._root, slug)
            except HarnessError as exc:  # the cold start meets it again, and says it
                logger.warning("spare worktree %s not taken: %s", spare.view, exc.message)
                return None
            if taken is None:
                return None
            self._spares.pop(spare.view, None)
            path, branch = self._root / slug, task_branch(slug)
            workspace = Workspace(slug, path, spare.repository, branch, spare.base, taken.git_dir)
        logger.info("workspace of %s: %s (%s, made ahead)", slug, path, spare.repository)
        return workspace

    async def drop_spare_worktree(self, spare: SpareWorktree) -> None:
        """Removes a spare worktree no task took: its folder, admin folder, placeholder
        branch and P."""
        self._spares.pop(spare.view, None)
        async with self._locks.repository(spare.repository):
            await run_whole(unregister_spare, spare)
        await run_whole(drop_spare_folders, spare.view, spare.private)

    async def prune_spare_leftovers(self, cutoff: float) -> int:
        """Removes what spares of a harness that stopped without closing them left, once
        their view folder is gone (``prune_views``): placeholder branches, the admin
        folders holding them and their object stores, in every configured repository, and
        their P folders untouched since ``cutoff`` (epoch seconds); how many spares'."""
        gone = 0
        for repo in self._repositories.all.values():
            source = repo.folder
            common = await self._repositories.common_dir(repo.name, repo)
            if source is None or common is None:
                continue
            async with self._locks.repository(repo.name):
                gone += await run_whole(prune_repository_spares, source, common, self._root)
        await run_whole(prune_spare_privates, self._root, cutoff)
        return gone


def _filled(spare: SpareWorktree) -> None:
    """A new spare worktree's files checked out, and the file ``with_gitdir`` shows written
    (blocking). Its base is recorded for the task that takes it, under the task's branch."""
    populate(spare.view)
    write_gitdir_file(spare.view)
