"""The file task store: ``<tasks dir>/<slug>/task.json`` plus per-task log files, and the
index ``<tasks dir>/.index.sqlite3`` that answers listings and lookups without reading every
task.json.

Every read-modify-write of a task runs in a worker thread under a per-task thread lock *and*
an ``fcntl.flock`` on ``<slug>/.lock``, writes task.json atomically and updates the index
before letting go, so concurrent agents, threads or processes never lose each other's
dispatch records.
"""

from __future__ import annotations

import asyncio
import builtins
import dataclasses
import fcntl
import logging
import os
import sqlite3
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

from harness.errors import AgentNotFoundError, HarnessError, TaskNotFoundError
from harness.journal import JournalWriter, LogEntries, read_lines
from harness.results import (
    FINAL_STATUSES,
    Decision,
    DispatchRecord,
    Task,
    TaskSummary,
    ThreadRef,
)
from harness.task_common import (
    LOCK_FILE,
    SLUG_RE,
    TASK_FILE,
    check_file_name,
    make_slug,
    newest_first,
    now,
    read_file,
    record_in,
    upsert,
    validate_slug,
    with_rule,
    write_file,
)
from harness.task_index import TaskIndex
from harness.task_json import read_task_file, write_task_file

logger = logging.getLogger(__name__)

T = TypeVar("T")


class FileTaskStore:
    """Plain files, one folder per task: git-friendly and safe across processes."""

    def __init__(self, tasks_dir: Path) -> None:
        self.tasks_dir = tasks_dir
        self._guard = threading.Lock()
        self._locks: dict[str, threading.Lock] = {}
        self._index = TaskIndex(tasks_dir)
        self._journal = JournalWriter(self._locked)

    # ------------------------------------------------------------ the TaskStore protocol

    async def create(
        self, description: str, thread: ThreadRef | None = None, repository: str | None = None
    ) -> Task:
        return await asyncio.to_thread(self._create, description, thread, repository)

    async def get(self, slug: str) -> Task:
        validate_slug(slug)
        return await asyncio.to_thread(self._read, slug)

    async def find_by_thread(self, thread: ThreadRef) -> Task | None:
        return await asyncio.to_thread(self._find_by_thread, thread)

    async def bind_thread(self, slug: str, thread: ThreadRef) -> Task:
        validate_slug(slug)
        return await asyncio.to_thread(
            self._update, slug, lambda task: dataclasses.replace(task, thread=thread)
        )

    async def list(self) -> builtins.list[Task]:
        return await asyncio.to_thread(self._list)

    async def summaries(self) -> builtins.list[TaskSummary]:
        return await asyncio.to_thread(self._summaries)

    async def record(self, agent_id: str) -> DispatchRecord:
        return await asyncio.to_thread(self._record, agent_id)

    async def knows_agent(self, agent_id: str) -> bool:
        def fallback(tasks: builtins.list[Task]) -> bool:
            return any(r.agent_id == agent_id for t in tasks for r in t.dispatches)

        return await asyncio.to_thread(
            self._with_index, lambda: bool(self._index.slugs_of_agent(agent_id)), fallback
        )

    async def unfinished(self) -> builtins.list[tuple[str, DispatchRecord]]:
        """(slug, record) of every queued or running dispatch, for recovery at start-up."""
        return await asyncio.to_thread(self._unfinished)

    async def save_dispatch(self, slug: str, record: DispatchRecord) -> Task:
        folder = self._folder(slug)
        record = _relative_journal(folder, record)
        return await asyncio.to_thread(self._update, slug, lambda task: upsert(task, record))

    async def add_decision(self, slug: str, decision: Decision) -> Task:
        validate_slug(slug)
        return await asyncio.to_thread(
            self._update,
            slug,
            lambda task: dataclasses.replace(task, decisions=(*task.decisions, decision)),
        )

    async def allow(self, slug: str, rule: str) -> Task:
        validate_slug(slug)
        return await asyncio.to_thread(self._update, slug, lambda task: with_rule(task, rule))

    def append_jsonl(self, slug: str, name: str, entry: dict[str, Any]) -> None:
        self._journal.append(slug, name, entry)

    async def read_jsonl(self, slug: str, name: str) -> LogEntries:
        validate_slug(slug)
        relative = check_file_name(name)
        await self.flush()
        return await asyncio.to_thread(self._read_log, slug, relative.as_posix())

    async def write_text(self, slug: str, name: str, text: str) -> None:
        validate_slug(slug)
        relative = check_file_name(name)

        def write() -> None:
            with self._locked(slug) as folder:
                write_file(folder, relative, text)

        await asyncio.to_thread(write)

    async def read_text(self, slug: str, name: str) -> str | None:
        validate_slug(slug)
        relative = check_file_name(name)

        def read() -> str | None:
            with self._locked(slug) as folder:
                return read_file(folder / relative)

        return await asyncio.to_thread(read)

    async def flush(self) -> None:
        await self._journal.flush()

    async def close(self) -> None:
        """Write every queued log line, end the writer and close the index."""
        await self._journal.close()
        await asyncio.to_thread(self._index.close)

    # ------------------------------------------------------------ blocking work (threads)

    def _folder(self, slug: str) -> Path:
        return self.tasks_dir / validate_slug(slug)

    @contextmanager
    def _locked(self, slug: str) -> Iterator[Path]:
        folder = self._folder(slug)
        with self._guard:
            lock = self._locks.setdefault(slug, threading.Lock())
        # The thread lock orders this process's writers; flock orders other processes.
        with lock:
            try:
                fd = os.open(folder / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
            except FileNotFoundError as exc:
                raise TaskNotFoundError(slug) from exc
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)
                yield folder
            finally:
                os.close(fd)  # closing releases the flock

    def _read(self, slug: str) -> Task:
        try:
            task, _ = read_task_file(self._folder(slug) / TASK_FILE, slug=slug)
        except (FileNotFoundError, NotADirectoryError) as exc:
            raise TaskNotFoundError(slug) from exc
        return task

    def _read_quietly(self, slug: str) -> Task | None:
        """The task, or None (with a warning when its file is corrupt): for lookups that
        must not fail because of one bad task."""
        try:
            return self._read(slug)
        except TaskNotFoundError:
            return None
        except HarnessError as exc:
            logger.warning("skipping task %s: %s", slug, exc)
            return None

    def _commit(self, task: Task) -> None:
        """Write task.json, then its index row. Callers hold the task's lock."""
        self._index.put(task, write_task_file(self._folder(task.slug) / TASK_FILE, task))

    def _create(self, description: str, thread: ThreadRef | None, repository: str | None) -> Task:
        self.tasks_dir.mkdir(parents=True, exist_ok=True)
        taken: set[str] = set()
        while True:
            slug = make_slug(description, taken)
            try:
                # mkdir is the atomic claim: two creators never get the same slug.
                (self.tasks_dir / slug).mkdir(exist_ok=False)
            except FileExistsError:
                taken.add(slug)
                continue
            break
        task = Task(slug, now(), description, thread=thread, repository=repository)
        with self._locked(slug):
            self._commit(task)
        logger.info("created task %s", slug)
        return task

    def _update(self, slug: str, change: Callable[[Task], Task]) -> Task:
        with self._locked(slug):
            task = change(self._read(slug))
            self._commit(task)
        return task

    def _read_log(self, slug: str, name: str) -> LogEntries:
        with self._locked(slug) as folder:
            return read_lines(folder / name)

    def _summaries(self) -> builtins.list[TaskSummary]:
        return self._with_index(
            self._index.summaries, lambda tasks: [TaskSummary.of(task) for task in tasks]
        )

    def _list(self) -> builtins.list[Task]:
        def from_index() -> builtins.list[Task]:
            slugs = [summary.slug for summary in self._index.summaries()]
            return [task for slug in slugs if (task := self._read_quietly(slug)) is not None]

        return self._with_index(from_index, lambda tasks: tasks)

    def _record(self, agent_id: str) -> DispatchRecord:
        def from_index() -> DispatchRecord:
            # The index points at the task; its task.json (the truth) gives the record. A
            # miss refreshes the index once: the agent may come from a hand edit or a pull.
            for refresh in (False, True):
                if refresh:
                    self._index.refresh()
                for slug in self._index.slugs_of_agent(agent_id):
                    task = self._read_quietly(slug)
                    for record in task.dispatches if task else ():
                        if record.agent_id == agent_id:
                            return record
            raise AgentNotFoundError(agent_id)

        return self._with_index(from_index, lambda tasks: record_in(tasks, agent_id))

    def _find_by_thread(self, thread: ThreadRef) -> Task | None:
        def from_index() -> Task | None:
            for refresh in (False, True):
                if refresh:
                    self._index.refresh()
                for slug in self._index.slugs_of_thread(thread):
                    task = self._read_quietly(slug)
                    if task is not None and task.thread == thread:
                        return task
            return None

        return self._with_index(
            from_index, lambda tasks: next((t for t in tasks if t.thread == thread), None)
        )

    def _unfinished(self) -> builtins.list[tuple[str, DispatchRecord]]:
        def from_index() -> builtins.list[tuple[str, DispatchRecord]]:
            # Only the tasks the index names are read; their files decide the statuses.
            slugs = dict.fromkeys(slug for slug, _ in self._index.unfinished())
            tasks = [task for slug in slugs if (task := self._read_quietly(slug)) is not None]
            return _unfinished_in(tasks)

        return self._with_index(from_index, _unfinished_in)

    def _with_index(
        self, answer: Callable[[], T], fallback: Callable[[builtins.list[Task]], T]
    ) -> T:
        """``answer()`` from the index; if SQLite cannot be used at all (a read-only tasks
        folder, a lock held too long), ``fallback`` over every task read from its file."""
        try:
            return answer()
        except sqlite3.Error as exc:
            logger.warning(
                "index %s unusable (%s): reading every task.json instead", self._index.file, exc
            )
            return fallback(self._read_all())

    def _read_all(self) -> builtins.list[Task]:
        try:
            names = sorted(entry.name for entry in os.scandir(self.tasks_dir))
        except FileNotFoundError:
            return []
        tasks = [
            task
            for name in names
            if SLUG_RE.match(name) and (task := self._read_quietly(name)) is not None
        ]
        return newest_first(tasks)


def _unfinished_in(tasks: list[Task]) -> list[tuple[str, DispatchRecord]]:
    return [
        (task.slug, record)
        for task in tasks
        for record in task.dispatches
        if record.status not in FINAL_STATUSES
    ]


def _relative_journal(folder: Path, record: DispatchRecord) -> DispatchRecord:
    """Store journalFile relative to the task folder even if a caller passed the full path."""
    path = Path(record.journal_file)
    if path.is_absolute() and path.is_relative_to(folder):
        return dataclasses.replace(record, journal_file=path.relative_to(folder).as_posix())
    return record
