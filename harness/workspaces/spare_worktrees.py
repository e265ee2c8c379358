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
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from dataclasses import dataclass, replace
from pathlib import Path

from harness.clock import SYSTEM, Clock
from harness.errors import HarnessError, WorkspaceError
from harness.git import git
from harness.sandbox.layout import Bind
from harness.workspaces.files import folder_kind, remove_tree, touch, worktree_admin_dir
from harness.workspaces.git_files import write_file
from harness.workspaces.git_stores import drop_store, rename_store, store_names
from harness.workspaces.git_view import SANDBOXES, GitView, open_view
from harness.workspaces.known_repositories import KnownRepositories
from harness.workspaces.locks import Locks
from harness.workspaces.repos import (
    add_worktree,
    branch_exists,
    populate,
    resolve_base,
    store_base,
)
from harness.workspaces.values import BRANCH_PREFIX, Workspace, task_branch
from harness.workspaces.views import VIEWS, adopt_view, drop_view, gitdir_file, new_view_path

logger = logging.getLogger(__name__)

PLACEHOLDER_MARK = "_"  # what a placeholder name starts with, and no slug does


def placeholder(view: Path) -> str:
    """The name a spare made at ``view`` goes by until a task takes it: its branch is
    ``harness/<name>``, its private folder ``.sandbox/<name>`` (pure)."""
    return PLACEHOLDER_MARK + view.name


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


def write_gitdir_file(view: Path) -> None:
    """The file :func:`with_gitdir` shows (blocking)."""
    write_file(gitdir_file(view), f"{view / '.git'}\n".encode())


def shown_admin(worktree: Path, view: Path) -> Path | None:
    """The admin folder of the worktree at ``worktree``, with the file :func:`with_gitdir`
    shows written for ``view`` (blocking)."""
    admin = worktree_admin_dir(worktree)
    write_gitdir_file(view)
    return Path(admin) if admin is not None else None


@dataclass(frozen=True)
class SpareWorktree:
    """A worktree made ahead, not yet any task's."""

    view: Path  # the worktree, at the path its agent is shown it at
    repository: str
    source: Path  # the repository's folder (or a `url` repository's cache)
    base: str  # the base branch's head when it was made
    admin: Path  # the worktree's admin folder in the repository's git directory (A)
    private: Path  # its P
    git: GitView  # what the spare's sandbox shows of its git

    @property
    def name(self) -> str:
        return placeholder(self.view)

    @property
    def branch(self) -> str:
        return BRANCH_PREFIX + self.name

    @property
    def common(self) -> Path:
        return self.admin.parent.parent


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
        name = placeholder(view)
        async with self._locks.repository(repo.name):
            source = await self._repositories.source(repo, self._clock.monotonic())
            base = await resolve_base(source, repo)
            await asyncio.to_thread(view.parent.mkdir, parents=True, exist_ok=True)
            await add_worktree(source, "-b", BRANCH_PREFIX + name, str(view), base)
        private = self._root / SANDBOXES / name
        found = await asyncio.to_thread(worktree_admin_dir, view)
        admin = Path(found) if found is not None else view / ".git"
        spare = SpareWorktree(view, repo.name, source, base, admin, private, GitView((), {}))
        try:
            await store_base(source, spare.branch, base)
            await populate(view)
            common = await self._repositories.common_dir(repo.name, repo)
            if common is None:
                raise WorkspaceError(
                    f"repository {repo.name!r} has no git directory at {source}",
                    fix=f"check `workspaces.repositories.{repo.name}` in config.yaml",
                )
            workspace = Workspace(name, view, repo.name, spare.branch, base, str(admin))
            opened = await open_view(workspace, common, private, writes=writes)
            await asyncio.to_thread(write_gitdir_file, view)
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
        path = self._root / slug
        asked = self._clock.monotonic()
        async with self._locks.task(slug):
            if await asyncio.to_thread(folder_kind, path) != "missing":
                return None
            try:
                async with self._locks.repository(spare.repository):
                    if not await self._take_spare(spare, slug, asked):
                        return None
            except HarnessError as exc:  # the cold start meets it again, and says it
                logger.warning("spare worktree %s not taken: %s", spare.view, exc.message)
                return None
            # What ``_open`` would find, known without asking git: the agent waits for it.
            git_dir = await asyncio.to_thread(_touched_admin_dir, path)
            self._spares.pop(spare.view, None)
            branch = task_branch(slug)
            workspace = Workspace(slug, path, spare.repository, branch, spare.base, git_dir)
        logger.info("workspace of %s: %s (%s, made ahead)", slug, path, spare.repository)
        return workspace

    async def _take_spare(self, spare: SpareWorktree, slug: str, asked: float) -> bool:
        """The spare's branch, folder and P become task ``slug``'s, when the base branch
        is where it was (under the task's and the repository's locks)."""
        repo = self._repositories.get(spare.repository)
        branch, private = task_branch(slug), self._root / SANDBOXES / slug
        source = await self._repositories.source(repo, asked)
        # Both only read: asked at once, the agent waits for one git process fewer.
        taken = asyncio.create_task(branch_exists(source, branch))
        try:
            base = await resolve_base(source, repo)
        except BaseException:
            taken.cancel()
            await asyncio.gather(taken, return_exceptions=True)
            raise
        if await taken or base != spare.base:
            if base != spare.base:
                logger.info("spare worktree %s: %s moved since", spare.view, repo.base_branch)
            return False
        if not await asyncio.to_thread(_usable, spare, private):
            return False
        await _rename_branch(spare, branch)
        try:
            await asyncio.to_thread(_move, spare, self._root / slug, private, slug)
        except OSError:
            with contextlib.suppress(HarnessError):
                await _rename_branch(spare, spare.branch, old=branch)
            raise
        await store_base(source, branch, spare.base)
        return True

    async def drop_spare_worktree(self, spare: SpareWorktree) -> None:
        """Removes a spare worktree no task took: its folder, admin folder, placeholder
        branch and P."""
        self._spares.pop(spare.view, None)
        async with self._locks.repository(spare.repository):
            removed = await git(
                "worktree", "remove", "--force", str(spare.view), cwd=spare.source, check=False
            )
            if not removed.ok:  # its folder went already: its admin folder is left
                await asyncio.to_thread(_remove_admin, spare.admin, spare.view)
            await delete_branch(spare.source, spare.common, spare.branch)
            await asyncio.to_thread(drop_store, spare.common, spare.name)
        await asyncio.to_thread(_drop_folders, spare.view, spare.private)

    async def prune_spare_leftovers(self, cutoff: float) -> int:
        """Removes what spares of a harness that stopped without closing them left, once
        their view folder is gone (``prune_views``): placeholder branches, the admin
        folders holding them and their object stores, in every configured repository, and
        their P folders untouched since ``cutoff`` (epoch seconds); how many spares'."""
        gone = 0
        for repo in self._repositories.all.values():
            source = repo.path or repo.cache
            if source is None or not await asyncio.to_thread(source.is_dir):
                continue
            listed = await git(
                "for-each-ref", "--format=%(refname:lstrip=2)",
                f"refs/heads/{BRANCH_PREFIX}{PLACEHOLDER_MARK}*", cwd=source, check=False,
            )  # fmt: skip
            common = await self._repositories.common_dir(repo.name, repo)
            for branch in listed.text.split() if listed.ok and common else []:
                assert common is not None
                name = branch.removeprefix(BRANCH_PREFIX)
                view = self._root / VIEWS / name.removeprefix(PLACEHOLDER_MARK)
                admin = common / "worktrees" / view.name
                if not await asyncio.to_thread(_remove_unviewed_admin, admin, view):
                    continue  # a spare still waiting, or a view not pruned yet
                async with self._locks.repository(repo.name):
                    await delete_branch(source, common, branch)
                    await asyncio.to_thread(drop_store, common, name)
                gone += 1
            if common is not None:
                async with self._locks.repository(repo.name):
                    await asyncio.to_thread(_drop_spare_stores, common, self._root)
        await asyncio.to_thread(_prune_privates, self._root, cutoff)
        return gone


async def _rename_branch(spare: SpareWorktree, branch: str, *, old: str | None = None) -> None:
    """The spare's branch (``old``, else its placeholder) renamed ``branch``, the worktree's
    HEAD with it. Never by ``git branch -m``, which may remove ``refs/heads/harness``
    (:func:`delete_branch` says why that must not happen)."""
    old = old or spare.branch
    created = f"branch: Created from {spare.base}"  # as ``git worktree add -b`` says
    await git("update-ref", "-m", created, f"refs/heads/{branch}", spare.base, "", cwd=spare.source)
    await asyncio.to_thread(
        write_file, spare.admin / "HEAD", f"ref: refs/heads/{branch}\n".encode()
    )
    await delete_branch(spare.source, spare.common, old)


async def delete_branch(source: Path, common: Path, branch: str) -> None:
    """Deletes a placeholder branch, its reflog and config, leaving its folder even when
    that empties it: git removes such a folder, and ``refs/heads/harness`` (and its logs)
    in C is where every running sandbox shows its P; removed on the host, it takes their
    binds along. So its loose files are removed by hand, and git (which removes the folder
    even for a ref that is not there) is asked only when the ref was packed meanwhile."""

    ref = f"refs/heads/{branch}"

    def unlink_loose() -> bool:
        """Whether the ref may still be there (packed), once its loose files are gone."""
        for folder in ("refs/heads", "logs/refs/heads"):
            (common / folder / branch).unlink(missing_ok=True)
        if (common / "reftable").exists():  # refs not in files: git alone can say
            return True
        try:  # the operator's git directory, which no agent writes
            packed = (common / "packed-refs").read_text(encoding="utf-8")
        except FileNotFoundError:
            return False
        return any(line.endswith(f" {ref}") for line in packed.splitlines())

    # Read here rather than asked of git: the process is a good part of a warm start.
    if (
        await asyncio.to_thread(unlink_loose)
        and (await git("show-ref", "--verify", "--quiet", ref, cwd=source, check=False)).ok
    ):
        await git("update-ref", "-d", ref, cwd=source, check=False)
    await git("config", "--remove-section", f"branch.{branch}", cwd=source, check=False)


def _usable(spare: SpareWorktree, private: Path) -> bool:
    return spare.view.is_dir() and not spare.view.is_symlink() and not os.path.lexists(private)


def _move(spare: SpareWorktree, path: Path, private: Path, slug: str) -> None:
    """The spare's folders become the task's (blocking)."""
    adopt_view(spare.view, path)
    # The admin folder's link back to the worktree, which git and the harness check.
    # Written in place, as git writes it: a file put over it (a rename) would undo the
    # spare's sandbox showing its own there (``with_gitdir``).
    with (spare.admin / "gitdir").open("w", encoding="utf-8") as back:
        back.write(f"{path / '.git'}\n")
    os.rename(spare.private, private)
    for folder in (private / "refs", private / "logs"):
        old = folder / spare.name
        if os.path.lexists(old):
            os.rename(old, folder / slug)
    rename_store(spare.common, spare.name, slug)


def _touched_admin_dir(path: Path) -> str | None:
    """The adopted worktree at ``path`` touched (a new task's), and its admin folder
    (blocking)."""
    touch(path)
    return worktree_admin_dir(path)


def _drop_folders(view: Path, private: Path) -> None:
    """A dropped spare's view and P (blocking)."""
    drop_view(view)
    remove_tree(private)


def _remove_unviewed_admin(admin: Path, view: Path) -> bool:
    """A leftover spare's admin folder removed once its view is gone; whether it was gone
    (blocking)."""
    if os.path.lexists(view):
        return False
    _remove_admin(admin, view)
    return True


def _remove_admin(admin: Path, view: Path) -> None:
    """A spare's admin folder, when it is the one of the worktree at ``view`` (blocking)."""
    try:
        back = (admin / "gitdir").read_text(encoding="utf-8").strip()
    except OSError:
        return
    if back == str(view / ".git"):
        remove_tree(admin)


def _drop_spare_stores(common: Path, root: Path) -> None:
    """Object stores of spares whose view is gone (blocking): a spare's agent never ran,
    so its store holds nothing of a task's."""
    for name in store_names(common):
        view = root / VIEWS / name.removeprefix(PLACEHOLDER_MARK)
        if name.startswith(PLACEHOLDER_MARK) and not os.path.lexists(view):
            drop_store(common, name)


def _prune_privates(root: Path, cutoff: float) -> None:
    """P folders of spares whose view is gone, untouched since ``cutoff`` (blocking)."""
    try:
        entries = list(os.scandir(root / SANDBOXES))
    except FileNotFoundError:
        return
    for entry in entries:
        if not entry.name.startswith(PLACEHOLDER_MARK):
            continue
        view = root / VIEWS / entry.name.removeprefix(PLACEHOLDER_MARK)
        if not os.path.lexists(view) and entry.stat(follow_symlinks=False).st_mtime < cutoff:
            remove_tree(Path(entry.path))
