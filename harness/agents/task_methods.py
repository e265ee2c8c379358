"""The orchestrator's methods about tasks and their workspaces: a part of its facade, kept in
a module of its own. Callers use them on the orchestrator."""

from __future__ import annotations

import contextlib
from datetime import timedelta
from typing import Any

from harness.agents.pending_finals import PendingFinals
from harness.agents.pool import AgentPool
from harness.agents.recovery import host_alive
from harness.config.settings import Config
from harness.errors import HarnessError, TaskDamagedError
from harness.tasks.context import build_task_context
from harness.tasks.model import FINAL_STATUSES, Task, TaskSummary, ThreadRef
from harness.tasks.removal import busy_error, damaged_error
from harness.tasks.store import DamagedTask, LogEntries, RepairReport, Store
from harness.workspaces.manager import (
    PruneReport,
    RepositoryChoice,
    WorkspaceInfo,
    Workspaces,
    choose_repository,
)

AUDIT_LOG = "audit.jsonl"


class TaskMethods:
    """Mixed into the orchestrator, whose parts these are."""

    _config: Config
    _store: Store
    _pool: AgentPool
    _workspaces: Workspaces
    _pending: PendingFinals  # final records the store has not taken yet: what it will say

    def choose_repository(self, text: str, channel: str | None = None) -> RepositoryChoice:
        """Which configured repository a request is about (``repo:NAME``, the channel's
        default, the configured default, the only one), and its text without the token."""
        return choose_repository(self._config.workspaces, text, channel)

    async def workspaces(self) -> list[WorkspaceInfo]:
        """Every task workspace on disk."""
        return await self._workspaces.list()

    async def prune_workspaces(
        self, older_than: timedelta | None = None, *, dry_run: bool = False
    ) -> PruneReport:
        """Remove the workspaces of tasks idle longer than ``older_than`` (default: config),
        never those of tasks with live agents; uncommitted work is saved to a patch first.
        ``dry_run``: only report what would be removed and kept."""
        active = {info.task_slug for info in self._pool.snapshot()}
        return await self._workspaces.prune(older_than, keep=active, dry_run=dry_run)

    async def create_task(
        self,
        description: str,
        thread: ThreadRef | None = None,
        repository: str | None = None,
        *,
        requester: str | None = None,
    ) -> Task:
        """A new task; ``requester`` (a front end's user id) decides for it with the admins."""
        return await self._store.create(description, thread, repository, requester)

    async def set_requester(self, slug: str, requester: str) -> Task:
        """Records who asked for a task made before requesters were kept."""
        return await self._store.set_requester(slug, requester)

    async def task(self, slug: str) -> Task:
        return await self._pending.overlay(await self._store.get(slug))

    async def find_task(self, thread: ThreadRef) -> Task | None:
        task = await self._store.find_by_thread(thread)
        return await self._pending.overlay(task) if task is not None else None

    async def task_summaries(self) -> list[TaskSummary]:
        """Every task in one line each, newest first (those that cannot be read are left
        out: see ``damaged_tasks``)."""
        summaries = await self._store.summaries()
        waiting = await self._pending.slugs()
        if not waiting:
            return summaries
        # A task with a final record still pending reads as the store will say once it is in.
        shown = []
        for summary in summaries:
            if summary.slug in waiting:
                with contextlib.suppress(HarnessError):  # unreadable now: as listed
                    summary = TaskSummary.of(await self.task(summary.slug))
            shown.append(summary)
        return shown

    async def damaged_tasks(self) -> list[DamagedTask]:
        """The tasks whose task.json cannot be read, for the front ends to say so."""
        return await self._store.damaged()

    async def repair_task(self, slug: str) -> RepairReport:
        """Make a damaged task readable again (see ``TaskStore.repair``)."""
        return await self._store.repair(slug)

    async def tasks(self) -> list[Task]:
        """Every readable task in full, newest first."""
        return [await self._pending.overlay(task) for task in await self._store.list()]

    async def deletable_task(self, slug: str, *, force: bool = False) -> Task | None:
        """The task ``delete_task`` would delete (None: it cannot be read). Raises when an
        agent is queued or running on it (here or in another live harness process), and
        when it cannot be read, unless ``force``; TaskNotFoundError when there is none."""
        try:
            task = await self._store.get(slug)
        except TaskDamagedError:
            if not force:
                raise damaged_error(slug) from None
            return None
        if not force:
            here = {info.agent_id for info in self._pool.snapshot() if info.task_slug == slug}
            busy = [
                d
                for d in task.dispatches
                if d.status not in FINAL_STATUSES
                and (d.agent_id in here or await host_alive(self._store, d))
            ]
            if busy:
                raise busy_error(slug, busy)
        return task

    async def delete_task(self, slug: str, *, force: bool = False) -> Task | None:
        """Delete a task with all its files (``TaskStore.delete``), on the terms of
        ``deletable_task``; the task as it was. Its workspace is left alone."""
        task = await self.deletable_task(slug, force=force)
        await self._store.delete(slug)
        return task

    async def task_context(self, slug: str) -> str:
        task = await self._store.get(slug)
        return build_task_context(task, budget_chars=self._config.context_budget_chars)

    async def allow_for_task(self, slug: str, rule: str) -> Task:
        """Remember a permission rule a human granted for the whole task."""
        return await self._store.allow(slug, rule)

    def audit(self, slug: str, entry: dict[str, Any]) -> None:
        """Queue one line of the task's audit log of tool calls."""
        self._store.append_jsonl(slug, AUDIT_LOG, entry)

    async def audit_log(self, slug: str) -> LogEntries:
        return await self._store.read_jsonl(slug, AUDIT_LOG)
