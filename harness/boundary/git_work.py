"""What an agent changed in its worktree or scratch folder, read and recorded with the
boundary's hardened git (``git``): the branch, uncommitted work, nested repositories left
out, the harness's commit of what the agent left, diffs and patches.

What an agent changed is read through a scratch index (``GIT_INDEX_FILE``): a copy of the
worktree's index in which every untracked file is marked intent-to-add, so one diff against
a commit shows committed, uncommitted and untracked work while the agent's index is not
written.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shutil
import stat
import tempfile
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from harness.boundary.git import (
    IGNORE_SUBMODULES,
    NestedRepositoryError,
    Tree,
    run,
)
from harness.errors import WorkspaceError

logger = logging.getLogger(__name__)

# Diff output others read (patch files, numstat) depends on no config and runs no driver.
_PLAIN_DIFF = (
    IGNORE_SUBMODULES,
    "--no-color",
    "--no-ext-diff",
    "--no-textconv",
    "--no-renames",
    "--src-prefix=a/",
    "--dst-prefix=b/",
)
_GITLINK = "160000"

FileStatus = Literal["added", "modified", "deleted", "type changed"]


@dataclass(frozen=True)
class FileChange:
    """One file a task changed, as its diff says (a value of the workspaces' reports)."""

    path: str  # relative to the worktree, as git spells it
    status: FileStatus
    insertions: int | None  # None for a binary file
    deletions: int | None


_STATUS: dict[str, FileStatus] = {
    "A": "added",
    "M": "modified",
    "D": "deleted",
    "T": "type changed",
}


@dataclass(frozen=True)
class Committed:
    """What ``commit_all`` did: the new commit (None: nothing to commit) and the nested
    repositories it left out (paths relative to the worktree, each still there)."""

    commit: str | None
    left_out: tuple[str, ...] = ()


# --- reading a worktree -------------------------------------------------------------------


async def head_branch(tree: Tree) -> str | None:
    """The branch checked out in the worktree; None when HEAD is detached."""
    result = await run(tree, "symbolic-ref", "--quiet", "--short", "HEAD", check=False)
    return result.text if result.ok else None


async def has_uncommitted_work(tree: Tree) -> bool:
    """Modified, staged, deleted or untracked (not ignored) files; a nested repository
    counts as an untracked folder, never looked into."""
    result = await run(tree, "status", "--porcelain", "--untracked-files=normal", IGNORE_SUBMODULES)
    return bool(result.stdout.strip())


async def fill(tree: Tree, branch: str) -> None:
    """The files of a worktree added with ``--no-checkout`` whose checkout never came (a
    crash between the two): its index built from ``branch``, and its files checked out when
    the folder holds none, so whatever is in it stays as it is. Nothing when it has its
    index, or when its HEAD is not on ``branch``: the repository holds every task's
    branches, and a HEAD its agent pointed at another's must not bring that one's files."""
    found = await asyncio.to_thread(index_or_files, tree.git_dir / "index", tree.work_tree)
    if found == "index" or await head_branch(tree) != branch:
        return
    await run(tree, "reset", "--quiet", *(() if found == "files" else ("--hard",)))


def index_or_files(index: Path, work_tree: Path) -> Literal["index", "files", "empty"]:
    """What a worktree added with ``--no-checkout`` holds: its ``index``, else files, else
    neither; which says how to fill it (``reset``, or ``reset --hard`` when empty). Blocking."""
    if os.path.lexists(index):
        return "index"
    with os.scandir(work_tree) as entries:
        return "files" if any(entry.name != ".git" for entry in entries) else "empty"


async def nested(tree: Tree, *, added_only: bool = False) -> tuple[str, ...]:
    """The git repositories inside the work tree, as paths relative to it: untracked folders
    holding one and gitlinks of the index (``added_only``: those its HEAD lacks, which an
    agent added). git lists both without looking inside them."""
    folders, links = await _repositories(tree)
    if added_only:
        links = await _added(tree, links)
    return tuple(sorted({*folders, *links}))


async def _repositories(tree: Tree) -> tuple[list[str], list[str]]:
    """The untracked folders holding a repository, and the index's gitlinks."""
    untracked, staged = await asyncio.gather(
        run(tree, "ls-files", "-z", "--others", "--exclude-standard"),
        run(tree, "ls-files", "-z", "--stage"),
    )
    folders = [
        path.rstrip("/") for path in _split(untracked.stdout) if path.endswith("/")
    ]  # only a repository is listed as a folder without --directory
    links = [
        record.partition("\t")[2]
        for record in _split(staged.stdout)
        if record.startswith(_GITLINK + " ")
    ]
    return folders, links


async def _added(tree: Tree, links: list[str]) -> list[str]:
    """Those of the gitlinks ``links`` that HEAD lacks."""
    if links and await _has_head(tree):
        listed = await run(tree, "ls-tree", "-r", "-z", "HEAD", "--", *_literal(links))
        kept = {
            record.partition("\t")[2]
            for record in _split(listed.stdout)
            if record.startswith(_GITLINK + " ")
        }
        links = [link for link in links if link not in kept]
    return links


async def _has_head(tree: Tree) -> bool:
    return (await run(tree, "rev-parse", "--verify", "--quiet", "HEAD", check=False)).ok


def _split(output: bytes) -> list[str]:
    return [item for item in output.decode("utf-8", "surrogateescape").split("\0") if item]


def _literal(paths: Sequence[str]) -> list[str]:
    return [f":(top,literal){path}" for path in paths]


def _all_but(paths: Sequence[str]) -> list[str]:
    """A pathspec of the whole tree without ``paths``."""
    return [":(top)", *(f":(top,exclude,literal){path}" for path in paths)]


async def commit_all(tree: Tree, message: str, *, author: str, email: str) -> Committed:
    """Commit every change in the worktree (untracked files too, not ignored ones) with
    ``message``, but nested repositories: gitlinks the agent added are taken out of its
    index and left out with untracked repositories, their files kept where they are. The
    repository's hooks and signing are skipped: this records the work as it is."""
    # One listing serves both: no repository of the tree is added, and those the agent
    # added are also taken out of its index (their folders are then untracked ones).
    folders, links = await _repositories(tree)
    every = sorted({*folders, *links})
    left_out = tuple(sorted({*folders, *await _added(tree, links)}))
    if left_out:
        logger.warning(
            "nested git repositories in %s left out of the commit (still there): %s",
            tree.work_tree,
            ", ".join(left_out),
        )
        # Out of the agent's index too. update-index takes paths as they are (no pathspec),
        # a path the index lacks is no error, and it looks inside nothing.
        await run(tree, "update-index", "--force-remove", "--", *left_out)
    if not await has_uncommitted_work(tree):
        return Committed(None, left_out)
    await run(tree, "add", "--all", "--", *_all_but(every))
    staged = await run(tree, "diff", "--cached", "--quiet", IGNORE_SUBMODULES, "HEAD", check=False)
    if staged.ok:
        return Committed(None, left_out)
    await run(
        tree,
        *("-c", f"user.name={author}", "-c", f"user.email={email}"),
        *("commit", "--quiet", "--no-verify", "--message", message),
        fix="commit the work in the worktree by hand, or set `workspaces.commitWork: false`",
    )
    return Committed((await run(tree, "rev-parse", "HEAD")).text, left_out)


@contextlib.asynccontextmanager
async def scratch_index(tree: Tree) -> AsyncIterator[dict[str, str]]:
    """Environment for git calls that see untracked files as added, leaving the real index
    be; nested repositories are not added. The copy keeps the real index's stat cache, so
    git re-reads only files that changed."""
    folder = Path(await asyncio.to_thread(tempfile.mkdtemp, prefix="harness-index-"))
    env = {"GIT_INDEX_FILE": str(folder / "index")}
    try:
        copied = await asyncio.to_thread(_copy_if_present, tree.git_dir / "index", folder / "index")
        if not copied:
            await run(tree, "read-tree", "HEAD", env=env)
        inside = await nested(tree)
        await run(tree, "add", "--all", "--intent-to-add", "--", *_all_but(inside), env=env)
        yield env
    finally:
        await asyncio.to_thread(shutil.rmtree, folder, True)


def _copy_if_present(source: Path, target: Path) -> bool:
    """Copies the agent's index, a regular file read without following a link; False when
    there is none."""
    try:
        fd = os.open(source, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except FileNotFoundError:
        return False
    except OSError as exc:
        raise WorkspaceError(
            f"{source} is not a file git made ({exc.strerror})", fix=f"look at {source}"
        ) from exc
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise WorkspaceError(f"{source} is not a regular file", fix=f"look at {source}")
        with os.fdopen(os.dup(fd), "rb") as file, open(target, "wb") as copy:
            shutil.copyfileobj(file, copy)
    finally:
        os.close(fd)
    return True


async def diff_files(tree: Tree, against: str) -> tuple[FileChange, ...]:
    """Every file that differs between commit ``against`` and the working tree."""
    async with scratch_index(tree) as env:
        numstat, names = await asyncio.gather(
            run(tree, "diff", *_PLAIN_DIFF, "-z", "--numstat", against, env=env),
            run(tree, "diff", *_PLAIN_DIFF, "-z", "--name-status", against, env=env),
        )
    counts = parse_numstat(numstat.stdout)
    fields = names.stdout.decode("utf-8", "surrogateescape").split("\0")
    changes = []
    for code, path in zip(fields[0::2], fields[1::2], strict=False):
        if path:
            insertions, deletions = counts.get(path, (None, None))
            changes.append(
                FileChange(path, _STATUS.get(code[:1], "modified"), insertions, deletions)
            )
    return tuple(sorted(changes, key=lambda change: change.path))


def parse_numstat(output: bytes) -> dict[str, tuple[int | None, int | None]]:
    """``git diff -z --numstat`` (without renames): path -> (insertions, deletions)."""
    counts: dict[str, tuple[int | None, int | None]] = {}
    for record in output.decode("utf-8", "surrogateescape").split("\0"):
        added, _, rest = record.partition("\t")
        deleted, _, path = rest.partition("\t")
        if path:  # binary files count as "-\t-"
            counts[path] = (
                int(added) if added.isdigit() else None,
                int(deleted) if deleted.isdigit() else None,
            )
    return counts


async def diff_patch(tree: Tree, against: str) -> bytes:
    """A patch from commit ``against`` to the working tree, untracked files included, that
    ``git apply`` re-applies (binary files as binary patches); nested repositories are not
    in it."""
    async with scratch_index(tree) as env:
        result = await run(tree, "diff", *_PLAIN_DIFF, "--binary", against, env=env)
    return result.stdout


# --- a scratch folder ---------------------------------------------------------------------


async def folder_patch(folder: Path) -> bytes:
    """A patch that recreates every file in a plain folder (``git apply`` in an empty one).

    A throwaway repository outside the folder does the work; the folder's own ``.git`` (if
    any) is neither used nor in the patch, and nothing is written into the folder.
    NestedRepositoryError when a folder in it holds a repository, which the patch would
    lose.
    """
    repo = Path(await asyncio.to_thread(tempfile.mkdtemp, prefix="harness-scratch-"))
    tree = Tree(folder, repo / "git", repo / "git")
    try:
        # With GIT_DIR named, init makes that folder alone, from no template.
        await run(tree, "init", "--quiet", "--template=")
        inside = await nested(tree)
        if inside:
            raise NestedRepositoryError(
                f"{folder} holds git repositories of its own ({', '.join(inside)}), which a "
                "patch of its files would not keep",
                fix=f"move them out of {folder} (or delete them) by hand",
            )
        await run(tree, "add", "--all", "--intent-to-add")
        result = await run(tree, "diff", *_PLAIN_DIFF, "--binary")
    finally:
        await asyncio.to_thread(shutil.rmtree, repo, True)
    return result.stdout


def scratch_has_commits(folder: Path) -> bool:
    """Whether the scratch folder's own ``.git`` holds anything (an object, a ref) beyond
    the empty repository the folder was made with: read as data, no git run, no link
    followed. Anything but a plain folder there counts as holding something. Blocking."""
    dot_git = folder / ".git"
    if not os.path.lexists(dot_git):
        return False
    if dot_git.is_symlink() or not dot_git.is_dir():
        return True
    for name in ("objects", "refs", "packed-refs"):
        path = dot_git / name
        if not os.path.lexists(path):
            continue
        if path.is_symlink() or not path.is_dir():
            return name != "packed-refs" or path.is_symlink() or path.stat().st_size > 0
        if any(files for _, _, files in os.walk(path)):
            return True
    return False
