"""File-system helpers of the workspaces. All blocking: callers run them in worker threads."""

from __future__ import annotations

import itertools
import os
import shutil
import tempfile
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Literal

from harness.boundary.files import BoundaryError, Folder, entry_kind, read_link_file, walk_stats
from harness.clock import file_stamp

# missing: nothing there yet; worktree: a folder whose `.git` is a file (a linked worktree);
# scratch: any other folder; other: a file or a symlink, never used as a workspace.
FolderKind = Literal["missing", "worktree", "scratch", "other"]
PATCHES = ".patches"


def folder_kind(path: Path) -> FolderKind:
    if path.is_symlink():
        return "other"
    if not path.exists():
        return "missing"
    if not path.is_dir():
        return "other"
    # Its `.git` is the agent's: a link there is no worktree's link file, and is not followed.
    try:
        with Folder.open(path) as folder:
            return "worktree" if entry_kind(folder, (".git",)) == "file" else "scratch"
    except BoundaryError:  # gone since
        return "missing"


def repository_missing(folder: Path) -> str:
    """What is missing of the repository at ``folder`` (the operator's, from config.yaml)
    that a worktree's git folder no longer leads to."""
    if not folder.is_dir():
        return f"{folder} does not exist"
    if not (folder / ".git").exists() and not (folder / "HEAD").is_file():
        return f"{folder} has no .git"
    return f"{folder} no longer holds this worktree's git folder (pruned, or cloned again)"


def make_scratch(path: Path) -> None:
    path.mkdir(parents=True, exist_ok=True)


def touch(path: Path) -> None:
    """Mark the workspace as in use now (what ``prune`` measures idleness from)."""
    os.utime(path)


def has_files(path: Path) -> bool:
    """Anything in the folder besides its ``.git`` (a worktree's link file, or the empty
    repository a scratch folder starts with)."""
    with os.scandir(path) as entries:
        return any(e.name != ".git" for e in entries)


def worktree_common_dir(path: Path) -> Path | None:
    """The git directory of the repository a linked worktree belongs to (resolved), read
    from the worktree's ``.git`` file and its admin folder; None when that link is broken."""
    admin = _gitdir(path)
    if admin is None:
        return None
    common = read_link_file(Path(admin) / "commondir")
    if common is None:
        return None
    return Path(os.path.realpath(os.path.join(admin, common)))


def worktree_admin_dir(path: Path) -> str | None:
    """Where a linked worktree's ``.git`` file points (its git directory, resolved); None when
    there is no such file or it says nothing readable."""
    admin = _gitdir(path)
    return os.path.realpath(admin) if admin is not None else None


def worktree_dirs(path: Path) -> tuple[Path | None, str | None]:
    """``worktree_common_dir`` and ``worktree_admin_dir`` of the worktree, read together."""
    return worktree_common_dir(path), worktree_admin_dir(path)


def _gitdir(path: Path) -> str | None:
    """What the worktree's ``.git`` file names, as a path (not resolved). The file is the
    agent's: read by handle, a link or anything but a small regular file refused, so it
    never names what another file says, and never blocks."""
    text = read_link_file(path / ".git")
    if text is None or not text.startswith("gitdir:"):
        return None
    return os.path.join(path, text.removeprefix("gitdir:").strip())


def latest_mtime(path: Path) -> float:
    """The newest modification time of the folder or anything in it (links not followed)."""
    return max(_mtimes(path))


def folder_facts(path: Path) -> tuple[FolderKind, float | None, bool | None]:
    """What a listing shows of a workspace folder: its kind, then for a worktree or scratch
    folder its ``latest_mtime``, and for a scratch folder whether it ``has_files``."""
    kind = folder_kind(path)
    if kind != "worktree" and kind != "scratch":
        return kind, None, None
    modified = latest_mtime(path)
    return kind, modified, has_files(path) if kind == "scratch" else None


def modified_since(path: Path, cutoff: float) -> bool:
    """Whether anything in the folder was modified at or after ``cutoff``; stops at the first."""
    return any(mtime >= cutoff for mtime in _mtimes(path))


def _mtimes(path: Path) -> Iterator[float]:
    # Walked by handle: a folder the agent swaps for a link is never walked through. Its
    # top `.git` (a scratch folder's own repository, a worktree's link) is not its work.
    yield path.lstat().st_mtime  # an OSError when the folder is gone, as for any stat
    try:
        folder = Folder.open(path)
    except BoundaryError:  # gone (or replaced) since
        return
    with folder:
        for info in walk_stats(folder, skip={".git"}):
            yield info.st_mtime


def write_patch(root: Path, slug: str, data: bytes, moment: datetime) -> Path:
    """``<root>/.patches/<slug>-<moment in UTC>.patch``, new (never overwriting) and synced
    to disk before the caller deletes what it saves."""
    folder = root / PATCHES
    folder.mkdir(parents=True, exist_ok=True)
    stamp = file_stamp(moment)
    for n in itertools.count(1):
        file = folder / (f"{slug}-{stamp}.patch" if n == 1 else f"{slug}-{stamp}-{n}.patch")
        try:
            with file.open("xb") as out:
                out.write(data)
                out.flush()
                os.fsync(out.fileno())
        except FileExistsError:
            continue
        return file
    raise AssertionError("unreachable")


def make_temp_beside(target: Path) -> Path:
    target.parent.mkdir(parents=True, exist_ok=True)
    return Path(tempfile.mkdtemp(dir=target.parent, prefix=f".{target.name}.tmp-"))


def move_into_place(temp: Path, target: Path) -> None:
    """Rename ``temp`` to ``target``; when another process got there first, keep theirs."""
    try:
        os.rename(temp, target)
    except OSError:
        if not target.is_dir():
            raise


def remove_tree(path: Path) -> None:
    shutil.rmtree(path, ignore_errors=True)


def remove_trees(*paths: Path) -> None:
    for path in paths:
        remove_tree(path)


def remove_tree_strict(path: Path) -> None:
    shutil.rmtree(path)
