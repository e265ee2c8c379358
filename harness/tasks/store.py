"""The task store: ``<tasks dir>/<slug>/task.json`` plus one journal per dispatch.

What the rest of the harness sees is three protocols, each doing one thing: ``TaskStore``
(tasks and their records), ``TaskFiles`` (a task's logs and text files) and ``RunLiveness``
(whether the process that started a dispatch still lives); ``Store`` is all three. Two
implementations pass each protocol's conformance suite (``task_store_suite.py``,
``task_files_suite.py`` and ``run_liveness_suite.py`` in ``tests/harness/tasks/``):
``FileTaskStore`` (``harness/tasks/files.py``, with its format in ``task_json.py`` and its
index in ``index.py``) and ``MemoryTaskStore`` below. Both queue log lines through the same
batched writer (``harness/tasks/journal.py``).
"""

from __future__ import annotations

import asyncio
import builtins
import dataclasses
import shutil
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Protocol

from harness.clock import SYSTEM, Clock
from harness.errors import TaskNotFoundError
from harness.tasks.common import (
    DamagedTask,
    RepairReport,
    check_file_name,
    creation_time,
    diff_file_name,
    journal_file_name,
    make_slug,
    newest_first,
    record_in,
    upsert,
    validate_slug,
    with_rule,
)
from harness.tasks.files import FileTaskStore
from harness.tasks.journal import JournalWriter, LogEntries, read_log
from harness.tasks.model import (
    FINAL_STATUSES,
    Decision,
    DispatchRecord,
    PullRequest,
    Task,
    TaskSummary,
    ThreadRef,
    Trigger,
)
from harness.tasks.run_lock import RUN_ID_BYTES, is_agent_id, is_run_id
from harness.tasks.spending import Spend, spending_since

__all__ = [
    "DamagedTask",
    "FileTaskStore",
    "LogEntries",
    "MemoryTaskStore",
    "RepairReport",
    "RunLiveness",
    "Store",
    "TaskFiles",
    "TaskStore",
    "diff_file_name",
    "journal_file_name",
    "make_slug",
    "validate_slug",
]


class TaskStore(Protocol):
    """Where tasks live: task.json and what it holds. Every method of the store's protocols
    is safe to call from the event loop: file work happens off it."""

    async def create(
        self,
        description: str,
        thread: ThreadRef | None = None,
        repository: str | None = None,
        requester: str | None = None,
        trigger: Trigger | None = None,
    ) -> Task:
        """A new task with a readable slug made unique from the description; ``trigger``:
        the routine's firing that started it, if one did."""
        ...

    async def get(self, slug: str) -> Task:
        """Raises InvalidSlugError for a malformed slug, TaskNotFoundError for a missing one,
        TaskDamagedError for one whose stored form cannot be read (as does every method that
        reads or changes one task)."""
        ...

    async def find_by_thread(self, thread: ThreadRef) -> Task | None:
        """The task bound to the thread; None when none is. TaskDamagedError when the thread's
        task cannot be read: the thread is not free."""
        ...

    async def bind_thread(self, slug: str, thread: ThreadRef) -> Task: ...

    async def set_requester(self, slug: str, requester: str) -> Task:
        """Records who asked for the task (a task made before requesters were kept)."""
        ...

    async def list(self) -> builtins.list[Task]:
        """All tasks, newest first."""
        ...

    async def summaries(self) -> builtins.list[TaskSummary]:
        """One line per task, newest first, without reading every task in full. Tasks that
        cannot be read are left out: ``damaged`` lists them."""
        ...

    async def spending(self, since: str) -> builtins.list[Spend]:
        """What each agent paid for that started on or after the UTC day ``since``
        (``2026-11-01``) spent, or holds while it lives, and who pays (``tasks/spending.py``);
        as cheap as ``summaries``. Simulated costs make no row."""
        ...

    async def damaged(self) -> builtins.list[DamagedTask]:
        """The tasks whose stored form cannot be read, by slug, with the problem and the
        thread they were bound to (when still known); as cheap as ``summaries``."""
        ...

    async def repair(self, slug: str) -> RepairReport:
        """Make a damaged task readable again: its damaged form is kept aside (never deleted)
        and the task keeps every part that still reads; the report says what was kept and
        dropped. A task that reads fine is left alone (``report.repaired`` is False)."""
        ...

    async def delete(self, slug: str) -> None:
        """Delete the task with every file of it (task.json, journals, diffs, audit log),
        damaged or not: it leaves listings and lookups at once, its log lines still queued
        are written first (never to a later task of the same slug), and its slug is free
        again. Raises as ``get`` for a malformed or missing slug."""
        ...

    async def record(self, agent_id: str) -> DispatchRecord:
        """The dispatch record of an agent of any task; AgentNotFoundError when unknown."""
        ...

    async def unfinished(self) -> builtins.list[tuple[str, DispatchRecord]]:
        """(task slug, record) for every dispatch still queued or running, newest task first:
        what a restart must recover. Does not read every task."""
        ...

    async def knows_agent(self, agent_id: str) -> bool:
        """Whether a stored dispatch has this agent id, as cheaply as the store can say (no
        re-reading of changed files): enough to keep a fresh random id from being reused."""
        ...

    async def save_dispatch(self, slug: str, record: DispatchRecord) -> Task:
        """Insert the record, or replace the one with the same agent_id. Atomic; never loses
        a concurrent writer's record."""
        ...

    async def add_decision(self, slug: str, decision: Decision) -> Task:
        """Append a decision to the task (atomic, like save_dispatch)."""
        ...

    async def allow(self, slug: str, rule: str) -> Task:
        """Remember a permission rule granted for the task (atomic; a repeat is kept once)."""
        ...

    async def raise_limits(self, slug: str, by: str) -> Task:
        """Records that ``by`` (an admin) lifted the spend limits for the task."""
        ...

    async def set_pull_request(self, slug: str, pull_request: PullRequest | None) -> Task:
        """Record the task's pull request (or forget it: None) atomically."""
        ...


class TaskFiles(Protocol):
    """The files of a task beside task.json: its logs of JSON lines (agents' journals, the
    audit log), queued and written in batches, and whole text files (agents' diffs)."""

    def append_jsonl(self, slug: str, name: str, entry: dict[str, Any]) -> None:
        """Queue one JSON line for a per-task log file (journals, audit log); never blocks.
        Raises at once for a bad slug or a name outside the task folder; lines for a task
        that does not exist are dropped with an error in the log."""
        ...

    async def read_jsonl(self, slug: str, name: str) -> LogEntries:
        """The entries of a per-task log file, queued lines included; [] when it is empty."""
        ...

    async def write_text(self, slug: str, name: str, text: str) -> None:
        """Write a whole file of the task (UTF-8, atomic), e.g. an agent's diff. Raises for a
        bad slug, a name outside the task folder or a missing task."""
        ...

    async def read_text(self, slug: str, name: str) -> str | None:
        """A file written by ``write_text``; None when there is no such file."""
        ...

    async def flush(self) -> None:
        """Every log line queued before the call is on disk."""
        ...


class RunLiveness(Protocol):
    """Runs: a *run* is one harness process's life with a store. Dispatch records carry its
    id, so a restart tells a dispatch of a live peer from one a dead process left running."""

    async def begin_run(self) -> str:
        """This store's run id (hex). The first call begins the run: it stays alive, for any
        process that asks ``run_alive``, until ``close()`` or this process's end however it
        ends (SIGKILL included); later calls return the same id."""
        ...

    async def run_alive(self, run_id: str) -> bool:
        """Whether the run is alive. False for an ended run, an unknown id and a malformed one;
        never touches a file outside the store."""
        ...

    async def ended_runs(self) -> builtins.list[str]:
        """The runs this store keeps that have ended (not yet forgotten), whatever ended them:
        the ones to clean up after (their leftover processes)."""
        ...

    async def forget_run(self, run_id: str) -> None:
        """Stop keeping an ended run (it leaves ``ended_runs``); a live run is kept."""
        ...

    async def take_up(self, run_id: str, agent_id: str) -> bool:
        """Whether this store's run takes up the agent ``agent_id`` the stopped run ``run_id``
        left unfinished (follows it on its worker, or marks it interrupted): True for the
        first run to ask and again for it, False while that run lives for any other (across
        the processes sharing the store) and for malformed ids."""
        ...


class Store(TaskStore, TaskFiles, RunLiveness, Protocol):
    """Everything the harness keeps, as both stores implement it; each part has its own
    conformance suite."""

    async def close(self) -> None:
        """Flush the queued log lines, stop the writer and end this store's run; safe to call
        twice."""
        ...


class MemoryTaskStore:
    """Tasks in memory (tests, throw-away runs); journals and logs still go to files under
    ``journal_dir/<slug>/``, through the same batched writer as the file store."""

    def __init__(self, journal_dir: Path, *, clock: Clock = SYSTEM) -> None:
        self.journal_dir = journal_dir
        self._clock = clock
        self._lock = threading.Lock()
        self._tasks: dict[str, Task] = {}
        self._journal = JournalWriter(self._log_folder)
        self._run_id: str | None = None
        self._ended_runs: builtins.list[str] = []

    def _get(self, slug: str) -> Task:
        task = self._tasks.get(validate_slug(slug))
        if task is None:
            raise TaskNotFoundError(slug)
        return task

    def _put(self, task: Task) -> Task:
        self._tasks[task.slug] = task
        return task

    async def create(
        self,
        description: str,
        thread: ThreadRef | None = None,
        repository: str | None = None,
        requester: str | None = None,
        trigger: Trigger | None = None,
    ) -> Task:
        with self._lock:
            slug = make_slug(description, self._tasks)
            task = Task(
                slug,
                creation_time(self._clock.now()),
                description,
                thread=thread,
                repository=repository,
                requester=requester,
                trigger=trigger,
            )
            return self._put(task)

    async def get(self, slug: str) -> Task:
        with self._lock:
            return self._get(slug)

    async def list(self) -> builtins.list[Task]:
        with self._lock:
            return newest_first(self._tasks.values())

    async def summaries(self) -> builtins.list[TaskSummary]:
        return [TaskSummary.of(task) for task in await self.list()]

    async def spending(self, since: str) -> builtins.list[Spend]:
        return spending_since(await self.list(), since)

    async def damaged(self) -> builtins.list[DamagedTask]:
        return []  # tasks in memory are never damaged

    async def repair(self, slug: str) -> RepairReport:
        with self._lock:
            self._get(slug)
        return RepairReport(slug)

    async def find_by_thread(self, thread: ThreadRef) -> Task | None:
        return next((task for task in await self.list() if task.thread == thread), None)

    async def delete(self, slug: str) -> None:
        validate_slug(slug)
        await self.flush()
        with self._lock:
            self._get(slug)
            del self._tasks[slug]
        await asyncio.to_thread(shutil.rmtree, self.journal_dir / slug, ignore_errors=True)

    async def record(self, agent_id: str) -> DispatchRecord:
        return record_in(await self.list(), agent_id)

    async def knows_agent(self, agent_id: str) -> bool:
        return any(r.agent_id == agent_id for t in await self.list() for r in t.dispatches)

    async def unfinished(self) -> builtins.list[tuple[str, DispatchRecord]]:
        return [
            (task.slug, record)
            for task in await self.list()
            for record in task.dispatches
            if record.status not in FINAL_STATUSES
        ]

    async def bind_thread(self, slug: str, thread: ThreadRef) -> Task:
        with self._lock:
            return self._put(dataclasses.replace(self._get(slug), thread=thread))

    async def set_requester(self, slug: str, requester: str) -> Task:
        with self._lock:
            return self._put(dataclasses.replace(self._get(slug), requester=requester))

    async def save_dispatch(self, slug: str, record: DispatchRecord) -> Task:
        with self._lock:
            return self._put(upsert(self._get(slug), record))

    async def add_decision(self, slug: str, decision: Decision) -> Task:
        with self._lock:
            current = self._get(slug)
            return self._put(dataclasses.replace(current, decisions=(*current.decisions, decision)))

    async def allow(self, slug: str, rule: str) -> Task:
        with self._lock:
            return self._put(with_rule(self._get(slug), rule))

    async def raise_limits(self, slug: str, by: str) -> Task:
        with self._lock:
            return self._put(dataclasses.replace(self._get(slug), limits_raised_by=by))

    async def set_pull_request(self, slug: str, pull_request: PullRequest | None) -> Task:
        with self._lock:
            return self._put(dataclasses.replace(self._get(slug), pull_request=pull_request))

    def append_jsonl(self, slug: str, name: str, entry: dict[str, Any]) -> None:
        self._journal.append(slug, name, entry)

    async def read_jsonl(self, slug: str, name: str) -> LogEntries:
        relative = check_file_name(name)
        with self._lock:
            self._get(slug)
        await self.flush()
        return await read_log(self._journal.files, self.journal_dir / slug / relative)

    async def write_text(self, slug: str, name: str, text: str) -> None:
        relative = check_file_name(name)
        with self._lock:
            self._get(slug)
        await self._journal.files.write_text(self.journal_dir / slug / relative, text)

    async def read_text(self, slug: str, name: str) -> str | None:
        relative = check_file_name(name)
        with self._lock:
            self._get(slug)
        path = self.journal_dir / slug / relative
        return await self._journal.files.read_text(path, errors="replace")

    async def flush(self) -> None:
        await self._journal.flush()

    async def close(self) -> None:
        await self._journal.close()
        with self._lock:
            if self._run_id is not None:
                self._ended_runs.append(self._run_id)
                self._run_id = None

    async def begin_run(self) -> str:
        with self._lock:
            if self._run_id is None:
                self._run_id = self._clock.token(RUN_ID_BYTES)
            return self._run_id

    async def run_alive(self, run_id: str) -> bool:
        # Runs live in memory: only this store's own run can be alive.
        with self._lock:
            return run_id == self._run_id

    async def ended_runs(self) -> builtins.list[str]:
        with self._lock:
            return builtins.list(self._ended_runs)

    async def forget_run(self, run_id: str) -> None:
        with self._lock:
            if run_id in self._ended_runs:
                self._ended_runs.remove(run_id)

    async def take_up(self, run_id: str, agent_id: str) -> bool:
        # One process's store: its own run is the only one that can take anything up.
        return is_run_id(run_id) and is_agent_id(agent_id)

    @contextmanager
    def _log_folder(self, slug: str) -> Iterator[Path]:
        """For the writer thread: the task's log folder, made on first use."""
        with self._lock:
            self._get(slug)
        folder = self.journal_dir / slug
        folder.mkdir(parents=True, exist_ok=True)
        yield folder
