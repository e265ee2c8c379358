"""One at a time, in this process: changes to a task's workspace (``task``), and to a
repository's shared state (``repository``: fetch, ``worktree add``, branches and their
config). Shared by every part of the workspaces that changes either."""

from __future__ import annotations

import asyncio


class Locks:
    def __init__(self) -> None:
        self._locks: dict[str, asyncio.Lock] = {}  # "task:<slug>", "repo:<name>"

    def task(self, slug: str) -> asyncio.Lock:
        return self._locks.setdefault(f"task:{slug}", asyncio.Lock())

    def repository(self, name: str) -> asyncio.Lock:
        return self._locks.setdefault(f"repo:{name}", asyncio.Lock())
