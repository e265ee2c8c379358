"""Settling a task's sandbox view of its git (``git_view``) after the run: what the agent
wrote in its private folder P brought into the repository's git directory C with the
harness's own git, outside the sandbox. The objects of P that the task's store lacks are
checked and copied into that store (``git_stores``: C reaches it, no other task's sandbox
does) without overwriting anything (a loose object against its name while it is copied, a
pack with ``git verify-pack``; the blocking copying is ``git_copy``'s), then the task's
branch is moved with ``update-ref``, only to a commit whose history is complete in C and
only from where the view left it.

Also the paths of a view (``Layout``), which both halves use. All of it is blocking: a whole
settling runs in one worker thread (``git_view``).
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from pathlib import Path

from harness.errors import WorkspaceError
from harness.git import GitResult, git_now
from harness.workspaces.files import remove_tree
from harness.workspaces.git_copy import Copied, bring_loose, place_pack, stage_pack
from harness.workspaces.git_files import read_regular, write_file
from harness.workspaces.git_stores import store_path
from harness.workspaces.values import BRANCH_PREFIX, task_branch

__all__ = [
    "Layout",
    "branch_commit",
    "c_git",
    "hex_length",
    "object_format",
    "read_regular",
    "settle",
    "write_file",
]

logger = logging.getLogger(__name__)

_BRANCHES = "refs/heads/" + BRANCH_PREFIX.rstrip("/")  # where every task's branch ref lives
_HEX = re.compile(r"[0-9a-f]+")


@dataclass(frozen=True)
class Layout:
    """The paths of one task's view: C, A and P, and what of P goes where in C."""

    slug: str
    common: Path  # C, resolved
    admin: Path  # A, resolved
    private: Path  # P

    @property
    def refs_mount(self) -> Path:
        return self.common / _BRANCHES

    @property
    def logs_mount(self) -> Path:
        return self.common / "logs" / _BRANCHES

    @property
    def objects(self) -> Path:
        return self.private / "objects"

    @property
    def store(self) -> Path:
        # The task's objects in C, settled there checked (``git_stores``).
        return store_path(self.common, self.slug)

    @property
    def shown(self) -> Path:
        # What the sandbox is shown at C (``git_shown``): made by the harness, read-only.
        return self.private / "common"

    @property
    def refs(self) -> Path:
        return self.private / "refs"

    @property
    def logs(self) -> Path:
        return self.private / "logs"

    @property
    def ref_file(self) -> Path:
        return self.refs / self.slug

    @property
    def start(self) -> Path:
        # Where the branch was when the view opened (or was last settled): outside every
        # bind, so the agent cannot change it.
        return self.private / "start"

    @property
    def branch_ref(self) -> str:
        return "refs/heads/" + task_branch(self.slug)


def settle(layout: Layout) -> str | None:
    """Bring the objects in P into the task's store (which C reaches), then move the task's
    branch to the commit P's ref names (``git_view.close_view``, which checks the worktree's
    git first, says how). The new head commit when the branch moved, else None."""
    fmt = object_format(layout)
    _bring_objects(layout, fmt)
    return _move_branch(layout, fmt)


def c_git(layout: Layout, *args: str, check: bool = True) -> GitResult:
    """git in C itself (never through the worktree, whose git directory the agent wrote)."""
    return git_now(f"--git-dir={layout.common}", *args, cwd=layout.common, check=check)


def branch_commit(layout: Layout) -> str | None:
    found = c_git(
        layout, "rev-parse", "--verify", "--quiet", f"{layout.branch_ref}^{{commit}}", check=False
    )
    return found.text if found.ok else None


# --- moving the branch --------------------------------------------------------------------


def _move_branch(layout: Layout, fmt: str) -> str | None:
    branch = task_branch(layout.slug)
    new, started = _read_ref_and_start(layout, hex_length(fmt))
    if new == started:
        return None  # the agent did not move it, or this was settled already
    current = branch_commit(layout)
    if new == current:
        write_file(layout.start, f"{new}\n".encode())
        return None
    if current is None or (started is not None and current != started):
        now = f"moved to {current}" if current else "was deleted"
        raise WorkspaceError(
            f"task {layout.slug}'s branch {branch} {now} in the repository while its agent "
            f"worked: the agent's {new} was not put on it",
            fix=f"merge or cherry-pick {new} onto {branch} by hand; its objects are in the "
            "repository",
        )
    kind = c_git(layout, "cat-file", "-t", new, check=False)
    if kind.text != "commit":
        found = "is not in the repository" if not kind.ok else f"is a {kind.text}, not a commit"
        raise _broken(layout, new, found)
    # Every object of the new history must be in C before a ref of C names it.
    walked = c_git(layout, "rev-list", "--quiet", "--objects", new, "--not", current, check=False)
    if not walked.ok:
        reason = walked.stderr.strip().splitlines()[-1] if walked.stderr.strip() else "no message"
        raise _broken(layout, new, f"has an incomplete history ({reason})")
    c_git(
        layout,
        *("update-ref", "-m", f"harness: the sandboxed work of task {layout.slug}"),
        *(layout.branch_ref, new, current),
    )
    write_file(layout.start, f"{new}\n".encode())
    logger.info("task %s: %s moved to %s", layout.slug, branch, new)
    return new


def _broken(layout: Layout, commit: str, found: str) -> WorkspaceError:
    return WorkspaceError(
        f"the sandbox of task {layout.slug} left its branch at {commit}, which {found}: "
        f"{task_branch(layout.slug)} stays where it was",
        fix=f"look at the worktree's git (`git -C <worktree> log`); {layout.ref_file} is the "
        "branch as the agent left it",
    )


def _read_ref_and_start(layout: Layout, length: int) -> tuple[str, str | None]:
    """The commit P's ref names and the one the view started from (blocking)."""
    new = _read_ref(layout, length)
    start = read_regular(layout.start, 256)
    return new, start.decode("ascii", "replace").strip() if start is not None else None


def _read_ref(layout: Layout, length: int) -> str:
    """The commit P's ref file names (a loose ref: the id and a newline)."""
    data = read_regular(layout.ref_file, limit=256)
    where = f"the sandbox of task {layout.slug}"
    fix = (
        f"the branch stays where it was; {layout.ref_file} should hold the commit the agent "
        "left its branch at: write it there and settle again, or open the view again"
    )
    if data is None:
        raise WorkspaceError(f"{where} left no branch ref {layout.ref_file}", fix=fix)
    text = data.decode("ascii", "replace").removesuffix("\n")
    if len(text) != length or not _HEX.fullmatch(text):
        raise WorkspaceError(f"{where} left its branch ref holding {text[:80]!r}", fix=fix)
    return text


def hex_length(fmt: str) -> int:
    return 64 if fmt == "sha256" else 40


# A repository's object format never changes: asked of git once per repository, not at
# every view opened and settled.
_FORMATS: dict[Path, str] = {}


def object_format(layout: Layout) -> str:
    """C's object format (``sha1`` or ``sha256``), the name of its hash."""
    if layout.common not in _FORMATS:
        found = c_git(layout, "rev-parse", "--show-object-format").text
        _FORMATS[layout.common] = found
    return _FORMATS[layout.common]


# --- bringing the objects in --------------------------------------------------------------


def _bring_objects(layout: Layout, fmt: str) -> None:
    """Copy the object files of P that the task's store lacks into it. A loose object is
    checked while it is copied (its name is the hash of its content), a pack with ``git
    verify-pack`` once copied beside the store's packs: a file the agent planted under an
    object's name must never stand in for that object in C. Anything else in P (symlinks,
    temporary files) is left there. Never into C's own objects, which every task's sandbox
    is shown, but for a pack holding some of them.

    An object C's own store has is never copied (the sandbox's git writes one again when it
    cannot touch C's copy): ``git gc`` in C drops from C's own store whatever a store also
    holds, and every other task's sandbox would lose it (``git_promote``)."""
    length = hex_length(fmt)
    found = bring_loose(layout.common, layout.slug, layout.objects, fmt, length)
    if found is None:
        return
    target, packs, counts = found
    for pack in packs:
        outcome = _copy_pack(layout, pack, target / "pack", length)
        counts[outcome] += 1
        if outcome == "invalid":
            logger.warning("task %s: %s is not a valid pack, not copied", layout.slug, pack)
    if counts["copied"] or counts["invalid"]:
        logger.info("task %s: objects into %s: %s", layout.slug, target, counts)


def _copy_pack(layout: Layout, pack: Path, target: Path, length: int) -> Copied:
    """Copy a pack and its index into the store's pack folder unless it is there: both copied
    into a temporary folder there (git looks at ``*.idx`` files of the pack folder only),
    verified, then linked into place, the pack first (git finds a pack by its index). A pack
    holding an object of C's own store goes into C's own pack folder instead (the rule of
    ``_bring_objects``; its other objects are then shown to every task)."""
    idx = pack.with_suffix(".idx")
    staged = stage_pack(pack, idx, target)
    if staged is None:
        return "present"
    temp, complete = staged
    try:
        if not complete:
            return "invalid"
        verified = c_git(layout, "verify-pack", str(temp / idx.name), check=False)
        if not verified.ok:
            return "invalid"
        return place_pack(layout.common, layout.slug, pack, temp, target, length)
    finally:
        remove_tree(temp)
