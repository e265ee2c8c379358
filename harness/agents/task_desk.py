"""The task desk: tasks as people and tools see them, their workspaces and their records.

What it says of a task includes the final records the store has not taken yet (``pending``),
so a front end never shows a finished agent as running because the disk was slow or full.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from datetime import timedelta
from typing import Any

from harness.agents.pending_finals import PendingFinals
from harness.agents.pool import AgentPool
from harness.agents.recovery import host_alive
from harness.clock import Clock, timestamp
from harness.config.settings import Config
from harness.errors import AgentNotFoundError, TaskDamagedError
from harness.tasks.context import build_task_context
from harness.tasks.journal import said_in
from harness.tasks.model import (
    FINAL_STATUSES,
    Decision,
    DispatchRecord,
    Feedback,
    FeedbackValue,
    Task,
    TaskSummary,
    ThreadRef,
    Trigger,
)
from harness.tasks.removal import busy_error, damaged_error
from harness.tasks.spending import Spend
from harness.tasks.store import DamagedTask, LogEntries, RepairReport, Store
from harness.workspaces.manager import (
    PruneReport,
    RepositoryChoice,
    WorkspaceInfo,
    Workspaces,
    choose_repository,
)

AUDIT_LOG = "audit.jsonl"


class TaskDesk:
    """Tasks, their workspaces and their dispatch records, for the front ends and the tools."""

    def __init__(
        self,
        config: Config,
        store: Store,
        pool: AgentPool,
        workspaces: Workspaces,
        pending: PendingFinals,
        clock: Clock,
    ) -> None:
        self._config = config
        self._store = store
        self._pool = pool  # which agents are live here: they keep their task and workspace
        self._workspaces = workspaces
        self._pending = pending  # final records the store has not taken yet: what it will say
        self._clock = clock

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
        trigger: Trigger | None = None,
    ) -> Task:
        """A new task; ``requester`` (a front end's user id) decides for it with the admins;
        ``trigger``: the routine's firing that started it."""
        return await self._store.create(description, thread, repository, requester, trigger)

    async def set_requester(self, slug: str, requester: str) -> Task:
        """Records who asked for a task made before requesters were kept."""
        return await self._store.set_requester(slug, requester)

    async def raise_limits(self, slug: str, by: str) -> Task:
        """Lifts the spend limits for the task (``by``: the admin who did; front ends check
        who may)."""
        return await self._store.raise_limits(slug, by)

    async def spending(self, since: str) -> list[Spend]:
        """What each paid agent that started on or after the UTC day ``since`` spent or
        holds, and who pays (``Store.spending``)."""
        return await self._store.spending(since)

    async def task(self, slug: str) -> Task:
        return await self._pending.overlay(await self._store.get(slug))

    async def find_task(self, thread: ThreadRef) -> Task | None:
        task = await self._store.find_by_thread(thread)
        return await self._pending.overlay(task) if task is not None else None

    async def this_run(self) -> str:
        """This process's run (what its dispatch records name)."""
        return await self._store.begin_run()

    async def held_elsewhere(self, thread: ThreadRef) -> str | None:
        """The run of another live process (a bot replica) whose agent works in the thread's
        task now, if any: what is said or pressed in that thread is for that process, which
        holds the agent's questions, approvals and the follow-ups queued behind it."""
        task = await self._store.find_by_thread(thread)
        return await self._live_elsewhere(task.dispatches) if task is not None else None

    async def agent_held_elsewhere(self, agent_id: str) -> str | None:
        """The run of another live process (a bot replica) that holds the unfinished agent
        ``agent_id``, if any: a command to stop it is for that process."""
        try:
            record = await self._store.record(agent_id)
        except AgentNotFoundError:
            return None
        return await self._live_elsewhere([record])

    async def agent_unfinished_elsewhere(self, agent_id: str) -> bool:
        """Whether ``agent_id`` is unfinished under another process's run (as
        ``unfinished_elsewhere`` says)."""
        try:
            record = await self._store.record(agent_id)
        except AgentNotFoundError:
            return False
        return await self.unfinished_elsewhere([record])

    async def unfinished_elsewhere(self, records: Sequence[DispatchRecord]) -> bool:
        """Whether one of ``records`` is unfinished under another process's run: a bot
        replica that holds it, or one that stopped and whose agents are being taken over
        (seconds). One process: never, for a restart marks its predecessor's ended or
        follows them here."""
        mine = await self._store.begin_run()
        return any(_unfinished_under_another(record, mine) for record in records)

    async def _live_elsewhere(self, records: Sequence[DispatchRecord]) -> str | None:
        mine = await self._store.begin_run()
        for record in records:
            run = record.run_id
            if run is None or not _unfinished_under_another(record, mine):
                continue
            if await self._store.run_alive(run):
                return run
        return None

    async def task_summaries(self) -> list[TaskSummary]:
        """Every task in one line each, newest first (those that cannot be read are left
        out: see ``damaged_tasks``)."""
        return await self._pending.summaries(await self._store.summaries())

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

    # -- dispatch records ------------------------------------------------------------------

    async def log_decision(self, agent_id: str, title: str, body: str) -> Task:
        """Keeps a live agent's decision with its task."""
        entry = self._pool.live(agent_id)
        decision = Decision(title, body, at=self._now(), agent_id=agent_id, role=entry.role)
        return await self._store.add_decision(entry.task_slug, decision)

    async def note_undelivered(self, task_slug: str, agent_id: str, reason: str) -> None:
        """Records on the agent's dispatch that its result could not be delivered, and why."""
        noted = await self._pending.amend(
            agent_id, lambda record: dataclasses.replace(record, undelivered=reason)
        )
        if noted is not None:
            return  # stored with its final record, still pending
        record = await self._store.record(agent_id)
        await self._store.save_dispatch(task_slug, dataclasses.replace(record, undelivered=reason))

    async def record_feedback(
        self, task_slug: str, agent_id: str, user: str, value: FeedbackValue
    ) -> DispatchRecord:
        """Keeps ``user``'s verdict on the agent's result on its dispatch (their latest one)."""
        verdict = Feedback(user, value, self._now())

        def with_verdict(record: DispatchRecord) -> DispatchRecord:
            kept = tuple(f for f in record.feedback if f.user != user)
            return dataclasses.replace(record, feedback=(*kept, verdict))

        pending = await self._pending.amend(agent_id, with_verdict)
        if pending is not None:  # stored with its final record, still pending
            return pending
        task = await self._store.get(task_slug)
        record = next((d for d in task.dispatches if d.agent_id == agent_id), None)
        if record is None:
            raise AgentNotFoundError(agent_id)
        record = with_verdict(record)
        await self._store.save_dispatch(task_slug, record)
        return record

    async def diff(self, task_slug: str, record: DispatchRecord) -> str | None:
        """The full diff of the task's workspace when the agent ended; None when it changed
        nothing or did not work in a git workspace."""
        if record.diff_file is None:
            return None
        kept = await self._pending.diff(record.agent_id)  # the folder refused it so far
        if kept is not None:
            return kept
        return await self._store.read_text(task_slug, record.diff_file)

    async def said(self, task_slug: str, record: DispatchRecord) -> list[str]:
        """Everything an agent said (its texts, in order), from its journal."""
        if not record.journal_file:
            return []
        entries = await self._store.read_jsonl(task_slug, record.journal_file)
        return [text for entry in entries for text in said_in(entry) if text]

    def _now(self) -> str:
        return timestamp(self._clock.now())


def _unfinished_under_another(record: DispatchRecord, mine: str) -> bool:
    """Whether ``record`` is unfinished under a run other than ``mine`` (pure)."""
    return record.status not in FINAL_STATUSES and record.run_id not in (None, mine)
