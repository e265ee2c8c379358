"""The blocking whole operations on spare worktrees (``spare_worktrees`` says what a spare
worktree is and runs each of these in one worker thread, under its locks): adding one ahead,
a task taking it, dropping it, and pruning what spares of a stopped harness left.

Every git call here is the harness's own over the repository's git directory (``git_now``);
nothing here runs git inside a worktree an agent wrote.
"""

from __future__ import annotations

import contextlib
import logging
import os
from dataclasses import dataclass
from pathlib import Path

from harness.config.settings import RepositorySettings
from harness.errors import HarnessError
from harness.git import git_now
from harness.workspaces.files import folder_kind, remove_tree, touch, worktree_admin_dir
from harness.workspaces.git_files import write_file
from harness.workspaces.git_stores import drop_store, rename_store, store_names
from harness.workspaces.git_view import SANDBOXES, GitView
from harness.workspaces.own_refs import UNSURE, read_ref
from harness.workspaces.repos import (
    add_worktree,
    base_ref,
    resolve_base,
    store_base,
)
from harness.workspaces.values import BRANCH_PREFIX, task_branch
from harness.workspaces.views import VIEWS, adopt_view, drop_view, gitdir_file

logger = logging.getLogger(__name__)

PLACEHOLDER_MARK = "_"  # what a placeholder name starts with, and no slug does


def placeholder(view: Path) -> str:
    """The name a spare made at ``view`` goes by until a task takes it: its branch is
    ``harness/<name>``, its private folder ``.sandbox/<name>`` (pure)."""
    return PLACEHOLDER_MARK + view.name


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


def write_gitdir_file(view: Path) -> None:
    """The file ``spare_worktrees.with_gitdir`` shows (blocking)."""
    write_file(gitdir_file(view), f"{view / '.git'}\n".encode())


def shown_admin(worktree: Path, view: Path) -> Path | None:
    """The admin folder of the worktree at ``worktree``, with the file ``with_gitdir``
    shows written for ``view`` (blocking)."""
    admin = worktree_admin_dir(worktree)
    write_gitdir_file(view)
    return Path(admin) if admin is not None else None


def add_spare_worktree(source: Path, repo: RepositorySettings, view: Path) -> tuple[str, Path]:
    """A worktree of the repository at ``view`` on the placeholder branch, from the base
    branch's head, its files not yet checked out; that head and the worktree's admin folder
    (blocking, under the repository's lock)."""
    base = resolve_base(source, repo)
    view.parent.mkdir(parents=True, exist_ok=True)
    add_worktree(source, "-b", BRANCH_PREFIX + placeholder(view), str(view), base)
    found = worktree_admin_dir(view)
    return base, Path(found) if found is not None else view / ".git"


@dataclass(frozen=True)
class Taken:
    """A spare worktree a task took."""

    git_dir: str | None  # its admin folder, as ``worktree_admin_dir`` reads it


def take_spare(
    spare: SpareWorktree, repo: RepositorySettings, root: Path, slug: str
) -> Taken | None:
    """The spare's branch, folder and P become task ``slug``'s, when the task has none of
    its own and the base branch is where it was; None when they did not (blocking, under
    the task's and the repository's locks)."""
    path, branch, private = root / slug, task_branch(slug), root / SANDBOXES / slug
    if folder_kind(path) != "missing" or _has_ref(
        spare.source, spare.common, f"refs/heads/{branch}"
    ):
        return None
    if not _base_unmoved(spare, repo):
        logger.info("spare worktree %s: %s moved since", spare.view, repo.base_branch)
        return None
    if not _usable(spare, private):
        return None
    _rename_branch(spare, branch)
    try:
        _move(spare, path, private, slug)
    except OSError:
        with contextlib.suppress(HarnessError):  # the move's failure is the one to report
            _rename_branch(spare, spare.branch, old=branch)
        raise
    store_base(spare.source, branch, spare.base)
    touch(path)  # a new task's
    return Taken(worktree_admin_dir(path))


def _has_ref(source: Path, common: Path, ref: str) -> bool:
    """Whether the repository at ``source`` has ``ref``: read from the files of its git
    directory ``common``, asked of git only when they cannot say (blocking)."""
    found = read_ref(common, ref)
    if found is None:
        return False
    if found != UNSURE:
        return True
    return git_now("show-ref", "--verify", "--quiet", ref, cwd=source, check=False).ok


def _base_unmoved(spare: SpareWorktree, repo: RepositorySettings) -> bool:
    """Whether the base branch is still at the commit the spare was made from: read from
    C's files, asked of git when they do not say so (blocking)."""
    if read_ref(spare.common, base_ref(repo)) == spare.base:
        return True
    return resolve_base(spare.source, repo) == spare.base


def unregister_spare(spare: SpareWorktree) -> None:
    """A spare worktree no task took, gone from its repository: its admin folder, placeholder
    branch and object store (blocking, under the repository's lock)."""
    removed = git_now(
        "worktree", "remove", "--force", str(spare.view), cwd=spare.source, check=False
    )
    if not removed.ok:  # its folder went already: its admin folder is left
        _remove_admin(spare.admin, spare.view)
    delete_branch(spare.source, spare.common, spare.branch)
    drop_store(spare.common, spare.name)


def drop_spare_folders(view: Path, private: Path) -> None:
    """A dropped spare's view and P (blocking)."""
    drop_view(view)
    remove_tree(private)


def prune_repository_spares(source: Path, common: Path, root: Path) -> int:
    """What spares of the repository at ``source`` (its git directory ``common``) left once
    their view under ``root`` is gone: placeholder branches, the admin folders holding them
    and their object stores; how many spares' (blocking, under the repository's lock)."""
    if not source.is_dir():
        return 0
    listed = git_now(
        "for-each-ref", "--format=%(refname:lstrip=2)",
        f"refs/heads/{BRANCH_PREFIX}{PLACEHOLDER_MARK}*", cwd=source, check=False,
    )  # fmt: skip
    gone = 0
    for branch in listed.text.split() if listed.ok else []:
        name = branch.removeprefix(BRANCH_PREFIX)
        view = root / VIEWS / name.removeprefix(PLACEHOLDER_MARK)
        if os.path.lexists(view):
            continue  # a spare still waiting, or a view not pruned yet
        _remove_admin(common / "worktrees" / view.name, view)
        delete_branch(source, common, branch)
        drop_store(common, name)
        gone += 1
    # Object stores of spares whose view is gone: a spare's agent never ran, so its store
    # holds nothing of a task's.
    for name in store_names(common):
        view = root / VIEWS / name.removeprefix(PLACEHOLDER_MARK)
        if name.startswith(PLACEHOLDER_MARK) and not os.path.lexists(view):
            drop_store(common, name)
    return gone


def prune_spare_privates(root: Path, cutoff: float) -> None:
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


def delete_branch(source: Path, common: Path, branch: str, *, config: bool = True) -> None:
    """Deletes a placeholder branch, its reflog and (``config``) its config section, leaving
    its folder even when that empties it: git removes such a folder, and
    ``refs/heads/harness`` (and its logs) in C is where every running sandbox shows its P;
    removed on the host, it takes their binds along. So its loose files are removed by hand,
    and git (which removes the folder even for a ref that is not there) is asked only when
    the ref was packed meanwhile (blocking)."""
    ref = f"refs/heads/{branch}"
    for folder in ("refs/heads", "logs/refs/heads"):
        (common / folder / branch).unlink(missing_ok=True)
    # Read here rather than asked of git: the process is a good part of a warm start.
    if _has_ref(source, common, ref):
        git_now("update-ref", "-d", ref, cwd=source, check=False)
    if config:
        git_now("config", "--remove-section", f"branch.{branch}", cwd=source, check=False)


def _rename_branch(spare: SpareWorktree, branch: str, *, old: str | None = None) -> None:
    """The spare's branch (``old``, else its placeholder) renamed ``branch``, the worktree's
    HEAD with it. Never by ``git branch -m``, which may remove ``refs/heads/harness``
    (:func:`delete_branch` says why that must not happen)."""
    old = old or spare.branch
    created = f"branch: Created from {spare.base}"  # as ``git worktree add -b`` says
    git_now("update-ref", "-m", created, f"refs/heads/{branch}", spare.base, "", cwd=spare.source)
    write_file(spare.admin / "HEAD", f"ref: refs/heads/{branch}\n".encode())
    # A placeholder branch has no config section (nothing is recorded for it); a task's
    # branch, renamed back when the move failed, may.
    delete_branch(spare.source, spare.common, old, config=old != spare.branch)


def _usable(spare: SpareWorktree, private: Path) -> bool:
    return spare.view.is_dir() and not spare.view.is_symlink() and not os.path.lexists(private)


def _move(spare: SpareWorktree, path: Path, private: Path, slug: str) -> None:
    """The spare's folders become the task's."""
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


def _remove_admin(admin: Path, view: Path) -> None:
    """A spare's admin folder, when it is the one of the worktree at ``view``."""
    try:
        back = (admin / "gitdir").read_text(encoding="utf-8").strip()
    except OSError:
        return
    if back == str(view / ".git"):
        remove_tree(admin)
