"""Removing idle workspaces without losing work: the pruning half of harness.workspaces.manager.

A worktree with uncommitted or untracked files (not ignored ones) is first saved as a patch
against its HEAD; the branch stays, so committed work stays too, and ``git apply`` of the
patch on that branch brings the rest back. A scratch folder's files are saved as a patch
that recreates them. Whatever cannot be saved or removed is kept and reported with why: a
workspace holding a git repository of its own (which no patch keeps, and the harness never
looks into) is kept.

Everything read of a workspace is read through ``harness.boundary.git``: an agent wrote it.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal, Self

from harness.boundary import git as agent_git
from harness.boundary import git_work as agent_work
from harness.clock import SYSTEM, Clock
from harness.errors import WorkspaceError
from harness.git import git
from harness.workspaces.files import (
    FolderKind,
    folder_kind,
    has_files,
    modified_since,
    remove_tree_strict,
    write_patch,
)

logger = logging.getLogger(__name__)

KeptReason = Literal["in use", "recent", "failed"]


@dataclass(frozen=True)
class Removed:
    slug: str
    patch: Path | None  # where its uncommitted work was saved; None when there was none
    # A dry run's: it has uncommitted work, which a real prune would save to a patch first.
    would_save: bool = False


@dataclass(frozen=True)
class Kept:
    slug: str
    reason: KeptReason
    detail: str  # for "failed": what went wrong and what to do


@dataclass(frozen=True)
class PruneReport:
    removed: tuple[Removed, ...]
    kept: tuple[Kept, ...]
    patches: tuple[Path, ...]  # every patch file written, also for workspaces then kept
    dry_run: bool = False  # nothing was removed or written: `removed` is what would be

    @classmethod
    def of(
        cls, outcomes: Iterable[Removed | Kept], patches: Iterable[Path], *, dry_run: bool = False
    ) -> Self:
        outcomes = list(outcomes)
        return cls(
            removed=tuple(o for o in outcomes if isinstance(o, Removed)),
            kept=tuple(o for o in outcomes if isinstance(o, Kept)),
            patches=tuple(patches),
            dry_run=dry_run,
        )


class Pruner:
    """One prune run over ``root``: removes workspaces not modified since ``cutoff``. A
    ``dry_run`` makes the same checks and changes nothing: its Removed are what would be.
    ``clock`` stamps the patches' names."""

    def __init__(
        self, root: Path, *, cutoff: float, dry_run: bool = False, clock: Clock = SYSTEM
    ) -> None:
        self.root = root
        self.cutoff = cutoff
        self._clock = clock
        self.dry_run = dry_run
        self.patches: list[Path] = []
        self._repositories: set[Path] = set()  # git dirs to `worktree prune` at the end

    async def prune(self, slug: str) -> Removed | Kept:
        path = self.root / slug
        kind, recent = await asyncio.to_thread(_kind_and_recent, path, self.cutoff)
        if kind not in ("worktree", "scratch"):
            return Kept(slug, "failed", f"{path} is not a folder the harness made")
        if recent:
            when = datetime.fromtimestamp(self.cutoff, UTC).isoformat(timespec="seconds")
            return Kept(slug, "recent", f"modified after {when}")
        try:
            if kind == "worktree":
                return await self._worktree(slug, path)
            return await self._scratch(slug, path)
        except (WorkspaceError, OSError) as exc:
            logger.warning("prune: kept %s: %s", path, exc)
            return Kept(slug, "failed", str(exc))

    async def finish(self) -> None:
        """Let each repository forget the worktrees removed from it."""
        if self.dry_run:
            return
        for common in sorted(self._repositories):
            await git(f"--git-dir={common}", "worktree", "prune", cwd=self.root, check=False)

    async def _save(self, slug: str, patch: bytes) -> Path | None:
        if not patch:
            return None
        file = await asyncio.to_thread(write_patch, self.root, slug, patch, self._clock.now())
        self.patches.append(file)
        logger.info("prune: saved the uncommitted work of %s to %s", slug, file)
        return file

    async def _worktree(self, slug: str, path: Path) -> Removed | Kept:
        try:
            tree = await agent_git.confine(path, root=self.root)
        except agent_git.UntrustedGitError as exc:  # its repository gone, or its links changed
            return Kept(
                slug,
                "failed",
                f"{path} is not a worktree of a repository the harness can use "
                f"({exc.reason}); its files are kept: copy what you need, then delete the "
                "folder",
            )
        # A submodule the worktree never checked out is an empty folder: nothing to lose.
        inside = await asyncio.to_thread(_with_git, path, await agent_work.nested(tree))
        if inside:
            return _holds_repositories(slug, path, inside)
        if await agent_work.head_branch(tree) is None:
            refs = ("refs/heads", "refs/remotes", "refs/tags")
            held = await agent_git.run(tree, "for-each-ref", "--count=1", "--contains=HEAD", *refs)
            if not held.text:
                # Removing the worktree would leave those commits on no branch at all.
                return Kept(
                    slug,
                    "failed",
                    f"{path} has a detached HEAD with commits no branch holds; create a branch "
                    "there (`git switch -c NAME`) or remove the worktree by hand",
                )
        if self.dry_run:
            return Removed(slug, None, would_save=await agent_work.has_uncommitted_work(tree))
        patch = None
        if await agent_work.has_uncommitted_work(tree):
            patch = await self._save(slug, await agent_work.diff_patch(tree, "HEAD"))
        # Always --force: without, git runs its own status over the worktree, submodules
        # included; what it would protect is saved above.
        await git(
            f"--git-dir={tree.common_dir}", "worktree", "remove", "--force", str(path),
            cwd=self.root,
        )  # fmt: skip
        self._repositories.add(tree.common_dir)
        return Removed(slug, patch)

    async def _scratch(self, slug: str, path: Path) -> Removed | Kept:
        commits, files = await asyncio.to_thread(_scratch_facts, path)
        if commits:
            # The empty repository the folder was made with goes; its history would not fit
            # in the patch of its files. (Read as data: its config is the agent's.)
            return Kept(
                slug,
                "failed",
                f"{path} holds a git repository with commits (.git); move or delete it by hand",
            )
        if self.dry_run:
            return Removed(slug, None, would_save=files)
        patch = None
        if files:
            try:
                patch = await self._save(slug, await agent_work.folder_patch(path))
            except agent_git.NestedRepositoryError as exc:
                logger.warning("prune: kept %s: %s", path, exc.message)
                return Kept(slug, "failed", f"{exc.message}; {exc.fix}")
        await asyncio.to_thread(remove_tree_strict, path)
        return Removed(slug, patch)


def _kind_and_recent(path: Path, cutoff: float) -> tuple[FolderKind, bool]:
    """The folder's kind, and for a workspace whether it was modified since ``cutoff``
    (blocking)."""
    kind = folder_kind(path)
    return kind, kind in ("worktree", "scratch") and modified_since(path, cutoff)


def _with_git(path: Path, names: Iterable[str]) -> list[str]:
    """Those of the nested folders that hold a ``.git`` (blocking)."""
    return [name for name in names if os.path.lexists(path / name / ".git")]


def _scratch_facts(path: Path) -> tuple[bool, bool]:
    """Whether a scratch folder's repository has commits, else whether it has files
    (blocking)."""
    if agent_work.scratch_has_commits(path):
        return True, False
    return False, has_files(path)


def _holds_repositories(slug: str, path: Path, inside: Iterable[str]) -> Kept:
    where = ", ".join(str(path / name) for name in inside)
    logger.warning("prune: kept %s: it holds git repositories of its own: %s", path, where)
    return Kept(
        slug,
        "failed",
        f"{path} holds git repositories of its own ({where}), which no patch keeps; move "
        "them out (or delete them) by hand",
    )
