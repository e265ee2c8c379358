"""The path an agent in the OS sandbox is shown its workspace at: ``<root>/.views/<id>``.

A spare agent is started before its task exists, in an empty folder (or a repository's
worktree, ``spare_worktrees.py``) made ahead at such a path; when it is given a new task,
that folder becomes the task's (``<root>/<slug>``) and its old path a link to it. So that an
agent started cold is shown its folder exactly as a spare is, every sandboxed run in a
task's workspace is shown the folder at a path of that kind too (a link to the task's
folder, for as long as the run lasts). On the host, where approvals and the harness's own
git look, links resolve to the task's folder. Blocking; callers use a thread.
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path

from harness.workspaces.files import folder_kind, remove_tree, touch

VIEWS = ".views"
GITDIR_SUFFIX = ".gitdir"


def new_view_path(root: Path) -> Path:
    """A view path not used yet (nothing is made there)."""
    # Lowercase letters and digits: the same shape as any folder the harness makes.
    return root / VIEWS / secrets.token_hex(6)


def link_view(root: Path, folder: Path) -> Path:
    """A new view path that links to ``folder``."""
    path = new_view_path(root)
    path.parent.mkdir(parents=True, exist_ok=True)
    os.symlink(os.path.relpath(folder, path.parent), path)
    return path


def adopt_view(view: Path, folder: Path) -> None:
    """The folder at ``view`` becomes ``folder`` (which must not exist yet), and ``view`` a
    link to it: a process whose working folder it is keeps it."""
    os.rename(view, folder)  # fails, and changes nothing, when ``folder`` exists
    os.symlink(os.path.relpath(folder, view.parent), view)


def adopt_scratch(view: Path, folder: Path) -> bool:
    """A spare's scratch folder at ``view`` becomes ``folder`` (``adopt_view``), touched as
    a workspace in use; False, nothing changed, when ``folder`` is there already."""
    if folder_kind(folder) != "missing":
        return False
    adopt_view(view, folder)
    touch(folder)
    return True


def gitdir_file(view: Path) -> Path:
    """Beside a view of a worktree: what the sandbox shows as the worktree's link back from
    its admin folder (``spare_worktrees.py``); it goes with the view."""
    return view.with_name(view.name + GITDIR_SUFFIX)


def drop_view(view: Path) -> None:
    """Removes a view: the link, or a spare's folder that was never adopted."""
    if view.is_symlink() or view.is_file():
        view.unlink(missing_ok=True)
    else:
        remove_tree(view)
    if not view.name.endswith(GITDIR_SUFFIX):
        gitdir_file(view).unlink(missing_ok=True)


def prune_views(root: Path, cutoff: float) -> int:
    """Removes the views left by a harness that stopped mid-run (untouched since ``cutoff``,
    epoch seconds); how many."""
    folder = root / VIEWS
    removed = 0
    try:
        entries = list(os.scandir(folder))
    except FileNotFoundError:
        return 0
    for entry in entries:
        if not os.path.lexists(entry.path):  # a view's gitdir file, gone with its view
            continue
        if entry.stat(follow_symlinks=False).st_mtime < cutoff:
            drop_view(Path(entry.path))
            removed += not entry.name.endswith(GITDIR_SUFFIX)
    return removed
