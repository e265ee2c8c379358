"""Removing idle workspaces without losing work: the pruning half of harness.workspaces.manager.

A worktree with uncommitted or untracked files (not ignored ones) is first saved as a patch
against its HEAD; the branch stays, so committed work stays too, and ``git apply`` of the
patch on that branch brings the rest back. A scratch folder's files are saved as a patch
that recreates them. Whatever cannot be saved or removed is kept and reported with why.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal, Self

from harness.workspaces.files import (
    folder_kind,
    has_files,
    modified_since,
    remove_tree_strict,
    worktree_common_dir,
    write_patch,
)
from harness.workspaces.git import (
    WorkspaceError,
    diff_patch,
    folder_patch,
    git,
    has_uncommitted_work,
    head_branch,
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
    ``dry_run`` makes the same checks and changes nothing: its Removed are what would be."""

    def __init__(self, root: Path, *, cutoff: float, dry_run: bool = False) -> None:
        self.root = root
        self.cutoff = cutoff
        self.dry_run = dry_run
        self.patches: list[Path] = []
        self._repositories: set[Path] = set()  # git dirs to `worktree prune` at the end

    async def prune(self, slug: str) -> Removed | Kept:
        path = self.root / slug
        kind = await asyncio.to_thread(folder_kind, path)
        if kind not in ("worktree", "scratch"):
            return Kept(slug, "failed", f"{path} is not a folder the harness made")
        if await asyncio.to_thread(modified_since, path, self.cutoff):
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
        file = await asyncio.to_thread(write_patch, self.root, slug, patch)
        self.patches.append(file)
        logger.info("prune: saved the uncommitted work of %s to %s", slug, file)
        return file

    async def _worktree(self, slug: str, path: Path) -> Removed | Kept:
        common = await asyncio.to_thread(worktree_common_dir, path)
        if common is None or not await asyncio.to_thread(common.is_dir):
            return Kept(
                slug,
                "failed",
                f"{path} is a worktree of a repository that is gone ({common}); its files are "
                "kept: copy what you need, then delete the folder",
            )
        if await head_branch(path) is None:
            refs = ("refs/heads", "refs/remotes", "refs/tags")
            held = await git("for-each-ref", "--count=1", "--contains=HEAD", *refs, cwd=path)
            if not held.text:
                # Removing the worktree would leave those commits on no branch at all.
                return Kept(
                    slug,
                    "failed",
                    f"{path} has a detached HEAD with commits no branch holds; create a branch "
                    "there (`git switch -c NAME`) or remove the worktree by hand",
                )
        if self.dry_run:
            return Removed(slug, None, would_save=await has_uncommitted_work(path))
        patch = None
        if await has_uncommitted_work(path):
            patch = await self._save(slug, await diff_patch(path, "HEAD"))
        # Without --force git refuses a worktree that changed since it was checked.
        force = ("--force",) if patch else ()
        await git(f"--git-dir={common}", "worktree", "remove", *force, str(path), cwd=self.root)
        self._repositories.add(common)
        return Removed(slug, patch)

    async def _scratch(self, slug: str, path: Path) -> Removed | Kept:
        if await asyncio.to_thread((path / ".git").exists) and await _has_commits(path):
            # The empty repository the folder was made with goes; commits would not fit in
            # the patch of its files.
            return Kept(
                slug,
                "failed",
                f"{path} holds a git repository with commits (.git); move or delete it by hand",
            )
        if self.dry_run:
            return Removed(slug, None, would_save=await asyncio.to_thread(has_files, path))
        patch = None
        if await asyncio.to_thread(has_files, path):
            patch = await self._save(slug, await folder_patch(path))
        await asyncio.to_thread(remove_tree_strict, path)
        return Removed(slug, patch)


async def _has_commits(folder: Path) -> bool:
    """Whether the repository in ``folder`` has a commit (its HEAD is born)."""
    result = await git("rev-parse", "--verify", "--quiet", "HEAD", cwd=folder, check=False)
    return result.ok
