"""The repositories the workspaces know: those of ``workspaces.repositories``, and those a
worker learns from the runs it takes. Each by name, its folder (a `url` repository's cache,
cloned the first time and fetched for each new task) and its git directory.

Shared by the parts of the workspaces that make worktrees (``manager``, ``spare_worktrees``)
and that show their git to a sandbox (``sandbox_git``)."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from pathlib import Path

from harness.blocking import run_whole
from harness.clock import SYSTEM, Clock
from harness.config.settings import RepositorySettings
from harness.workspaces.files import repository_missing
from harness.workspaces.repos import check_local, clone, common_dir, fetch, stored_base
from harness.workspaces.values import RepositoryGoneError, Workspace, unknown_repository


class KnownRepositories:
    def __init__(
        self, repositories: Mapping[str, RepositorySettings], clock: Clock = SYSTEM
    ) -> None:
        self._repositories = dict(repositories)
        self._clock = clock
        self._fetched: dict[str, float] = {}  # repository -> monotonic time its fetch began
        self._common_dirs: dict[str, Path] = {}  # repository -> its git common dir

    @property
    def all(self) -> dict[str, RepositorySettings]:
        """Every known repository by name (a copy: learning one later leaves it as it is)."""
        return dict(self._repositories)

    def add(self, repo: RepositorySettings) -> None:
        self._repositories[repo.name.lower()] = repo

    def _known(self, name: str | None) -> RepositorySettings | None:
        return self._repositories.get(name.lower()) if name is not None else None

    def get(self, name: str) -> RepositorySettings:
        """The repository ``name``; a WorkspaceError naming the known ones when unknown."""
        repo = self._repositories.get(name.lower())
        if repo is None:
            raise unknown_repository(name, sorted(self._repositories))
        return repo

    async def source(self, repo: RepositorySettings, asked: float) -> Path:
        """The folder of the repository; a `url` repository's cache, cloned or fetched.
        ``asked``: the clock's monotonic time the caller asked, under the repository's lock."""
        if repo.path is not None:
            await run_whole(check_local, repo, repo.path)
            return repo.path
        assert repo.url is not None and repo.cache is not None
        if not await asyncio.to_thread(repo.cache.exists):
            self._fetched[repo.name] = self._clock.monotonic()
            await clone(repo.url, repo.cache)
        elif self._fetched.get(repo.name, -1.0) < asked:
            # A fetch that began after this task asked is as fresh as one of its own.
            self._fetched[repo.name] = self._clock.monotonic()
            await fetch(repo.url, repo.cache)
        return repo.cache

    async def name_of(self, common: Path) -> str | None:
        """The known repository whose git directory is ``common``."""
        for name, repo in list(self._repositories.items()):
            if await self.common_dir(name, repo) == common:
                return name
        return None

    async def gone(self, workspace: Workspace, repo: RepositorySettings) -> RepositoryGoneError:
        """The error for ``workspace``, whose repository ``repo`` the harness cannot find."""
        folder = repo.folder
        missing = await asyncio.to_thread(repository_missing, folder) if folder else None
        return RepositoryGoneError(workspace, repo, missing)

    async def vanished(self, workspace: Workspace) -> RepositoryGoneError | None:
        """Why the repository of ``workspace`` (a worktree the harness made or opened) is gone
        since: its folder or its git directory; None while it is there, or when it is not a
        configured one (another check says so)."""
        name = workspace.repository
        repo = self._known(name)
        if name is None or repo is None:
            return None
        common = await self.common_dir(name, repo)
        if common is not None and await asyncio.to_thread((common / "HEAD").is_file):
            return None
        self._common_dirs.pop(name, None)  # looked for again, once it is back
        return await self.gone(workspace, repo)

    async def stored_base(self, name: str | None, branch: str) -> str | None:
        """The base commit recorded for ``branch`` in the known repository ``name``; None
        when none is, or ``name`` is None or no longer known."""
        repo = self._known(name)
        source = repo.folder if repo is not None else None
        if source is None:
            return None
        return await run_whole(stored_base, source, branch)

    async def common_dir(self, name: str, repo: RepositorySettings) -> Path | None:
        """The git directory of the known repository ``name`` (kept once found)."""
        if name not in self._common_dirs:
            found = await run_whole(common_dir, repo.folder)
            if found is None:
                return None
            self._common_dirs[name] = found
        return self._common_dirs[name]
