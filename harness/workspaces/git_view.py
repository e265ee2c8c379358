"""The git an agent may use inside its OS sandbox, without write access to the repository
and without seeing any other task's work in it.

A task's worktree is a linked worktree of a repository whose git directory (the common dir,
C) holds every task's branches and the operator's own branches, hooks and config. Inside the
sandbox, C is shown as the task alone would have it, read-only; what git must write goes to
places that are the task's alone:

- at C's path, a folder of the task's (``git_shown``): copies of C's small files without
  other tasks' branches (``packed-refs``, ``config``), C's ``objects``, ``refs``, ``logs`` and
  ``hooks`` bound in read-only, and of ``C/worktrees`` only the worktree's admin folder A
  (HEAD, index, logs/HEAD), writable;
- new objects go to ``P/objects`` (``GIT_OBJECT_DIRECTORY``); C's objects are read from
  there as an alternate, and through them the task's store (``git_stores``), where its
  settled objects are: no other task's objects are ever in C's own store or shown, and
  C's own store is kept whole for the public history (``git_promote``);
- ``P/refs`` is shown over ``C/refs/heads/harness`` and ``P/logs`` over
  ``C/logs/refs/heads/harness``: the task's branch ref (and its reflog) is a file of P, and
  other tasks' branch refs are not there.

P is a private folder per task, outside the worktree (the workspaces put it at
``<root>/.sandbox/<slug>``). After the run, :func:`close_view` checks the worktree's git is
still the harness's and settles the view (``git_settle``): brings the agent's work into the
task's store with the harness's own git, the objects checked and copied without overwriting
anything, and the branch moved only to a commit whose history is complete. Until then C's
own git maintenance (``gc``) may complain about the objects A's index and reflog name that
are in P.

Opening, opening ahead and closing a view are each a whole blocking operation (the harness's
own git in C and the file work between), run in one worker thread (``harness.blocking``).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from harness.blocking import run_whole
from harness.boundary.files import read_link_file
from harness.errors import TamperedWorkspaceError, WorkspaceError
from harness.sandbox.layout import Bind
from harness.workspaces.files import remove_tree, worktree_admin_dir
from harness.workspaces.git_files import read_regular, write_file
from harness.workspaces.git_promote import complete_own, promote
from harness.workspaces.git_settle import Layout, branch_commit, settle
from harness.workspaces.git_shown import (
    EMPTY_SHOWN,
    STORE_SHOWN,
    fill_shown,
    remote_task_folders,
    shared_folders,
)
from harness.workspaces.git_stores import alternate_entry, ensure_store
from harness.workspaces.values import BRANCH_PREFIX, Workspace, task_branch

logger = logging.getLogger(__name__)

# The folder under the workspaces' root holding each task's P.
SANDBOXES = ".sandbox"


@dataclass(frozen=True)
class GitView:
    """What an agent's sandbox must show of its worktree's git, in mount order (a later bind
    goes over an earlier one), and the environment its git needs there."""

    binds: tuple[Bind, ...]
    env: Mapping[str, str]


# --- opening --------------------------------------------------------------------------------


async def open_view(
    workspace: Workspace, common: Path, private: Path, *, writes: bool = True
) -> GitView:
    """Prepare ``private`` (P) for a run of an agent in ``workspace``, a worktree of the
    repository whose git directory is ``common`` (C), and say what its sandbox must show.

    For a writer, work a previous view left unsettled (its branch moved in P) is settled
    first; P's refs and logs are then made afresh from C (the branch's current commit and its
    reflog); its objects are kept (A's index may name some of them). A reader (``writes``
    false), which may run beside a writer, gets the same folders read-only and P as it is,
    the ref only brought up to C's branch when P holds no unsettled commit. The worktree is
    read-only for a reader too. TamperedWorkspaceError when the worktree's git directory is
    no longer the one the harness made in C.
    """
    return await run_whole(_open_view, workspace, common, private, writes)


def _open_view(workspace: Workspace, common: Path, private: Path, writes: bool) -> GitView:
    """``open_view``, whole (blocking)."""
    layout, unsettled = _opening(workspace, common, private, writes)
    if unsettled:
        try:
            settle(layout)
        except WorkspaceError as exc:
            # Its objects stay in P; only the ref naming them is replaced.
            logger.warning(
                "task %s: the unsettled branch of its last run is dropped: %s",
                workspace.slug,
                exc.message,
            )
    head = branch_commit(layout)
    if head is None:
        raise WorkspaceError(
            f"the repository {layout.common} has no branch {task_branch(workspace.slug)}",
            fix="prepare the task's workspace again",
        )
    (_fill_private if writes else _show_private)(layout, head)
    return _shown_view(workspace, layout, writes)


async def view_ahead(
    workspace: Workspace, common: Path, private: Path, *, writes: bool = True
) -> GitView:
    """What ``open_view`` will show, for a sandbox started before its run (a spare waiting
    for its task's next agent): the folders are made, P's ref, reflog and objects left as
    they are, so an agent of the task still running keeps its view; ``open_view`` at
    dispatch fills them in place, which a sandbox already running sees."""
    return await run_whole(_view_ahead, workspace, common, private, writes)


def _view_ahead(workspace: Workspace, common: Path, private: Path, writes: bool) -> GitView:
    """``view_ahead``, whole (blocking)."""
    return _shown_view(workspace, _ahead(workspace, common, private), writes)


def _opening(
    workspace: Workspace, common: Path, private: Path, writes: bool
) -> tuple[Layout, bool]:
    """``open_view``'s file work before git (blocking): the checked layout, its mount points
    made, and whether a writer finds work a previous view left unsettled."""
    layout = _checked_layout(workspace, common, private)
    _make_mount_points(layout)
    return layout, writes and _unsettled(layout)


def _ahead(workspace: Workspace, common: Path, private: Path) -> Layout:
    """``view_ahead``'s file work (blocking): the checked layout, its mount points and P's
    folders made."""
    layout = _checked_layout(workspace, common, private)
    _make_mount_points(layout)
    for folder in (layout.private, layout.objects, layout.refs, layout.logs):
        _plain_folder(folder)
    return layout


def _shown_view(workspace: Workspace, layout: Layout, writes: bool) -> GitView:
    """C's own store made whole for its public history (``git_promote``), the task's store
    made (C reaching it), what the sandbox is shown at C made afresh from C, and the view
    over them."""
    promote(layout)
    complete_own(layout)
    try:
        shared, covered = _make_shown(layout)
    except OSError as exc:
        raise WorkspaceError(
            f"cannot make what task {workspace.slug}'s sandbox shows of its git at "
            f"{layout.shown}: {exc.strerror or exc}",
            fix=f"delete {layout.shown}; the harness makes it again",
        ) from exc
    binds = view_binds(workspace.path, layout, writes, shared, covered)
    return GitView(binds, _view_env(layout))


def _make_shown(layout: Layout) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """``_shown_view``'s file work: C's shared folders and the folders of its
    refs to cover, as they are now."""
    ensure_store(layout.common, layout.slug)
    fill_shown(layout.shown, layout.common, layout.admin.name, task_branch(layout.slug))
    return shared_folders(layout.common), remote_task_folders(layout.common)


def view_binds(
    worktree: Path,
    layout: Layout,
    writes: bool,
    shared: tuple[str, ...],
    covered: tuple[str, ...] = (),
) -> tuple[Bind, ...]:
    """The binds of a view, in mount order (pure): the worktree; at C, the task's own
    folder (``git_shown``) with C's ``shared`` folders bound in, read-only, and an empty
    folder over each ``covered`` one in them; the task's store where the shown pool names
    it; then, over those, what the task may write: A, the only folder of ``worktrees``, and
    its branch ref, reflog and new objects in P."""
    common = layout.common
    empty = str(layout.shown / EMPTY_SHOWN)
    return (
        Bind(str(worktree), str(worktree), writes),
        Bind(str(layout.shown), str(common), False),
        *(Bind(str(common / name), str(common / name), False) for name in shared),
        *(Bind(empty, str(common / name), False) for name in covered),
        Bind(str(layout.store), str(common / STORE_SHOWN), False),
        Bind(str(layout.admin), str(common / "worktrees" / layout.admin.name), writes),
        Bind(str(layout.refs), str(layout.refs_mount), writes),
        Bind(str(layout.logs), str(layout.logs_mount), writes),
        Bind(str(layout.objects), str(layout.objects), writes),
    )


def _view_env(layout: Layout) -> dict[str, str]:
    return {
        "GIT_OBJECT_DIRECTORY": str(layout.objects),
        "GIT_ALTERNATE_OBJECT_DIRECTORIES": alternate_entry(layout.common / "objects"),
    }


def _checked_layout(workspace: Workspace, common: Path, private: Path) -> Layout:
    """The view's layout, its A checked (``_check_admin``) (blocking)."""
    if workspace.git_dir is None:
        raise WorkspaceError(
            f"task {workspace.slug}'s workspace {workspace.path} is not a git worktree",
            fix="a scratch folder needs no git view",
        )
    resolved = Path(os.path.realpath(common))
    admin = Path(os.path.realpath(workspace.git_dir))
    layout = Layout(workspace.slug, resolved, admin, private)
    _check_admin(workspace, layout)
    return layout


def _check_admin(workspace: Workspace, layout: Layout) -> None:
    """A is still what the harness made: the worktree's ``.git`` names it, it is a folder of
    ``C/worktrees``, its ``commondir`` leads to C and its ``gitdir`` back to the worktree. An
    agent can rewrite all but the first from inside, to send git (its own, the harness's) to
    another repository."""
    now = worktree_admin_dir(workspace.path)
    if now != workspace.git_dir:
        raise TamperedWorkspaceError(workspace, now)
    problem = _admin_problem(layout, workspace.path)
    if problem is not None:
        raise TamperedWorkspaceError(workspace, f"{layout.admin}, {problem}")


def _admin_problem(layout: Layout, worktree: Path) -> str | None:
    """Why A is not what the harness made, or None. A is writable in the sandbox: its files
    are read by handle (a link, a FIFO or a large file refused) and what they say is never
    quoted, so a ``gitdir`` linked to a secret cannot carry the secret into the thread."""
    admin = layout.admin
    if admin.parent != layout.common / "worktrees" or not admin.is_dir():
        return f"which is not a folder of {layout.common / 'worktrees'}"
    common, back = read_link_file(admin / "commondir"), read_link_file(admin / "gitdir")
    if common is None or back is None:
        return "whose commondir or gitdir is not a small text file"
    if Path(os.path.realpath(admin / common)) != layout.common:
        return f"whose commondir does not lead to {layout.common}"
    if os.path.realpath(admin / back) != os.path.realpath(worktree / ".git"):
        return "whose gitdir does not lead back to the worktree"
    return None


def _make_mount_points(layout: Layout) -> None:
    """bubblewrap cannot make a folder inside a read-only bind: the folders P's refs and logs
    are shown over must exist in C, as real folders (a symlink would move the bind)."""
    for folder in (layout.refs_mount, layout.logs_mount):
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise WorkspaceError(
                f"cannot make {folder} in the repository: {exc.strerror or exc}",
                fix=f"make sure {folder} can be a folder (no branch is named "
                f"{BRANCH_PREFIX.rstrip('/')}) and the harness may write there",
            ) from exc
        if os.path.realpath(folder) != str(folder):
            raise WorkspaceError(
                f"{folder} in the repository leads elsewhere ({os.path.realpath(folder)})",
                fix=f"replace it by a plain folder holding the {BRANCH_PREFIX}* branch refs",
            )


def _fill_private(layout: Layout, head: str) -> None:
    """P's refs and logs afresh, emptied in place: a sandbox of the same task still running
    keeps seeing the folders its binds show."""
    for folder in (layout.private, layout.objects, layout.refs, layout.logs):
        _plain_folder(folder)
    for folder in (layout.refs, layout.logs):
        with os.scandir(folder) as entries:
            for entry in entries:
                if entry.is_dir(follow_symlinks=False):
                    remove_tree(Path(entry.path))
                else:
                    os.unlink(entry.path)
    reflog = read_regular(layout.common / "logs" / layout.branch_ref, limit=None)
    if reflog is not None:
        write_file(layout.logs / layout.slug, reflog)
    write_file(layout.ref_file, f"{head}\n".encode())
    write_file(layout.start, f"{head}\n".encode())


def _show_private(layout: Layout, head: str) -> None:
    """P for a reader: left as it is, but for a ref that names no commit of a writer's (and so
    may be behind C's branch, moved by the harness since)."""
    for folder in (layout.private, layout.objects, layout.refs, layout.logs):
        _plain_folder(folder)
    if not _unsettled(layout) and read_regular(layout.ref_file, 256) != f"{head}\n".encode():
        write_file(layout.ref_file, f"{head}\n".encode())
        write_file(layout.start, f"{head}\n".encode())


def _plain_folder(folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    if folder.is_symlink() or not folder.is_dir():
        raise WorkspaceError(
            f"{folder} is not a plain folder", fix=f"delete {folder}; the harness makes it again"
        )


def _unsettled(layout: Layout) -> bool:
    """A previous view's branch moved and was never brought into C."""
    if not layout.ref_file.exists() and not layout.ref_file.is_symlink():
        return False
    return read_regular(layout.ref_file, limit=256) != read_regular(layout.start, limit=256)


# --- closing --------------------------------------------------------------------------------


async def close_view(workspace: Workspace, common: Path, private: Path) -> str | None:
    """Bring the work of the agent that ran in ``workspace``'s view into C, with the harness's
    own git, outside the sandbox: the objects in P (those C lacks, each checked against its
    name), then the task's branch, moved to the commit P's ref names once that commit and
    its history are complete in C. The new head commit when the branch moved, else None.

    Idempotent. WorkspaceError, the branch left where it was, when P's ref is missing,
    malformed or names something broken, or when the branch moved in C since the view opened
    (the agent's commits stay in P, and C now has their objects).
    """
    return await run_whole(_close_view, workspace, common, private)


def _close_view(workspace: Workspace, common: Path, private: Path) -> str | None:
    """``close_view``, whole (blocking)."""
    return settle(_checked_layout(workspace, common, private))
