"""What a task's sandbox is shown at the repository's git directory C: not C itself, which
holds every task's branches, worktree folders (index, HEAD, reflog) and objects, but a folder
the harness makes in the task's private folder P (``P/common``), shown read-only over C.

It holds copies of C's small files with every task branch left out (``packed-refs``,
``config``, ``HEAD``; ``info/exclude`` and ``info/attributes``, never ``info/refs``, which
``git gc`` fills with every ref; git told to leave C's commit-graph, whose list of commit ids
covers other tasks' too), and empty folders where the sandbox binds, read-only, C's
own ``objects``, ``refs``, ``logs`` and ``hooks`` (``git_view`` lists the binds), the task's
own worktree folder A (under ``worktrees/``, beside no other) and its store (``harness/task``,
the one alternate of the pool shown at ``harness/objects``: ``git_stores``).

The copies are snapshots of when the view opened, replaced whole (a rename); the folders are
made once and never removed: a sandbox running binds over them, and a bind goes when the
folder under it is replaced. The harness's own git never reads P/common.
"""

from __future__ import annotations

import logging
import os
import re
from pathlib import Path

from harness.workspaces.git_files import read_regular, write_file
from harness.workspaces.git_stores import HARNESS, POOL
from harness.workspaces.values import BRANCH_PREFIX

logger = logging.getLogger(__name__)

# C's folders shown as they are (read-only), when C has them; refs/heads/harness and
# logs/refs/heads/harness in them are covered by the task's own (``git_view``).
SHARED = ("objects", "refs", "logs", "hooks")
# Where the task's store is shown, and the pool naming it alone.
STORE_SHOWN = f"{HARNESS}/task"
POOL_SHOWN = f"{HARNESS}/{POOL}"
# An empty folder, shown over the folders of C's refs holding remotes' copies of task
# branches (``remote_task_folders``).
EMPTY_SHOWN = f"{HARNESS}/empty"
_INFO = ("exclude", "attributes")
_SECTION = re.compile(rb'\s*\[\s*branch\s+"((?:[^"\\\n]|\\.)*)"\s*\]', re.IGNORECASE)
_OTHER_SECTION = re.compile(rb"\s*\[")
# Last, so it wins over C's own setting.
_NO_COMMIT_GRAPH = b"[core]\n\tcommitGraph = false\n"


def is_task_ref(name: str) -> bool:
    """A task's branch, or a remote's copy of one (pure)."""
    parts = name.split("/")
    if parts[:3] == ["refs", "heads", BRANCH_PREFIX.rstrip("/")]:
        return True
    return parts[:2] == ["refs", "remotes"] and parts[3:4] == [BRANCH_PREFIX.rstrip("/")]


def filter_packed_refs(data: bytes) -> bytes:
    """``packed-refs`` without any task's branch (the task's own is a loose ref of its P);
    a peeled line (``^<id>``) goes with the ref it follows (pure)."""
    kept: list[bytes] = []
    dropping = False
    for line in data.splitlines(keepends=True):
        if line.startswith(b"^"):
            if not dropping:
                kept.append(line)
            continue
        if line.startswith(b"#"):
            dropping = False
            kept.append(line)
            continue
        _, _, name = line.rstrip(b"\r\n").partition(b" ")
        dropping = is_task_ref(name.decode("utf-8", "replace"))
        if not dropping:
            kept.append(line)
    return b"".join(kept)


def filter_config(data: bytes, own_branch: str) -> bytes:
    """C's ``config`` without other tasks' branch sections (``[branch "harness/..."]``,
    each to the next section's header); the task's own kept (pure)."""
    kept: list[bytes] = []
    dropping = False
    for line in data.splitlines(keepends=True):
        header = _SECTION.match(line)
        if header is not None:
            branch = _unquote(header.group(1))
            dropping = branch.startswith(BRANCH_PREFIX) and branch != own_branch
        elif _OTHER_SECTION.match(line):
            dropping = False
        if not dropping:
            kept.append(line)
    return b"".join(kept)


def shown_config(data: bytes | None, own_branch: str) -> bytes:
    """The config shown: C's without other tasks' branches (``filter_config``), and git told
    not to read C's commit-graph, which lists the commits of every branch ``gc`` saw (other
    tasks' included) and which ``fsck`` would check against objects it cannot see (pure)."""
    kept = filter_config(data, own_branch) if data is not None else b""
    if kept and not kept.endswith(b"\n"):
        kept += b"\n"
    return kept + _NO_COMMIT_GRAPH


def _unquote(subsection: bytes) -> str:
    return re.sub(rb"\\(.)", rb"\1", subsection).decode("utf-8", "replace")


def shown_head(data: bytes | None, own_branch: str) -> bytes:
    """C's ``HEAD`` (the main worktree's) when it names a branch that is no task's; else
    (a task's branch, or a commit, which may be on one) the task's own branch (pure)."""
    text = (data or b"").decode("utf-8", "replace").strip()
    if text.startswith("ref:") and not is_task_ref(text.removeprefix("ref:").strip()):
        return f"{text}\n".encode()
    return f"ref: refs/heads/{own_branch}\n".encode()


def shared_folders(common: Path) -> tuple[str, ...]:
    """Those of C's shared folders it has (blocking)."""
    return tuple(name for name in SHARED if (common / name).is_dir())


def remote_task_folders(common: Path) -> tuple[str, ...]:
    """The folders of loose refs (and their reflogs) that remotes' copies of task branches
    are in, ``refs/remotes/<remote>/harness``, which a push of a task's branch to a named
    remote makes (blocking). One made after the sandbox started is not covered; their
    packed refs are left out of ``packed-refs`` all the same."""
    found: list[str] = []
    branches = BRANCH_PREFIX.rstrip("/")
    for base in ("refs/remotes", "logs/refs/remotes"):
        try:
            remotes = sorted(e.name for e in os.scandir(common / base) if e.is_dir())
        except (FileNotFoundError, NotADirectoryError):
            continue
        for remote in remotes:
            folder = common / base / remote / branches
            if folder.is_dir() and not folder.is_symlink():
                found.append(f"{base}/{remote}/{branches}")
    return tuple(found)


def fill_shown(shown: Path, common: Path, admin_name: str, own_branch: str) -> None:
    """Make or refresh ``shown``, what the sandbox is shown at ``common`` (blocking): its
    folders made when missing, its files replaced by copies of C's as they are now."""
    folders = [shown, shown / "info", shown / "worktrees", shown / "worktrees" / admin_name]
    folders += [shown / name for name in SHARED]
    folders += [shown / STORE_SHOWN, shown / POOL_SHOWN / "info", shown / EMPTY_SHOWN]
    for folder in folders:
        folder.mkdir(parents=True, exist_ok=True)
        if folder.is_symlink() or not folder.is_dir():
            raise OSError(f"{folder} is not a plain folder")
    _put(shown / "HEAD", shown_head(read_regular(common / "HEAD", None), own_branch))
    _put(shown / "config", shown_config(read_regular(common / "config", None), own_branch))
    packed = read_regular(common / "packed-refs", None)
    _put(shown / "packed-refs", filter_packed_refs(packed) if packed is not None else None)
    _put(shown / "shallow", read_regular(common / "shallow", None))
    for name in _INFO:
        _put(shown / "info" / name, read_regular(common / "info" / name, None))
    # The shown pool's one alternate: the task's store, relative to the pool.
    _put(shown / POOL_SHOWN / "info" / "alternates", b"../task\n")


def _put(path: Path, data: bytes | None) -> None:
    """``path`` holding ``data``, replaced whole when it differs; gone for None."""
    if data is None:
        if os.path.lexists(path):
            os.unlink(path)
        return
    if read_regular(path, None) != data:
        write_file(path, data)
