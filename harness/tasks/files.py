"""The file task store: ``<tasks dir>/<slug>/task.json`` plus per-task log files, and the
index ``<tasks dir>/.index.sqlite3`` that answers listings and lookups without reading every
task.json.

Every read-modify-write of a task runs in a worker thread under a per-task thread lock *and*
an ``fcntl.flock`` on ``<slug>/.lock``, writes task.json atomically and updates the index
before letting go, so concurrent agents, threads or processes never lose each other's
dispatch records.

Runs: ``<tasks dir>/.runs/<run id>.lock``, one per harness process, locked for its life
(``harness/tasks/run_lock.py``).
"""

from __future__ import annotations

import asyncio
import builtins
import dataclasses
import fcntl
import logging
import os
import shutil
import sqlite3
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

from harness.clock import SYSTEM, Clock
from harness.errors import (
    AgentNotFoundError,
    HarnessError,
    TaskDamagedError,
    TaskNotFoundError,
)
from harness.tasks import run_lock
from harness.tasks.common import (
    LOCK_FILE,
    SLUG_RE,
    TASK_FILE,
    DamagedTask,
    RepairReport,
    check_file_name,
    creation_time,
    damaged_error,
    make_slug,
    newest_first,
    read_file,
    record_in,
    upsert,
    validate_slug,
    with_rule,
    write_file,
)
from harness.tasks.index import TaskIndex
from harness.tasks.journal import JournalWriter, LogEntries, read_lines
from harness.tasks.model import (
    FINAL_STATUSES,
    Decision,
    DispatchRecord,
    Task,
    TaskSummary,
    ThreadRef,
)
from harness.tasks.repair import salvage, salvaged_thread, set_aside
from harness.tasks.task_json import read_task_file, write_task_file

logger = logging.getLogger(__name__)

T = TypeVar("T")

# Deleted task folders on their way out (a dot name: never a slug, so never listed).
_TRASH_PREFIX = ".deleted-"


class FileTaskStore:
    """Plain files, one folder per task: git-friendly and safe across processes."""

    def __init__(self, tasks_dir: Path, *, clock: Clock = SYSTEM) -> None:
        self.tasks_dir = tasks_dir
        self._clock = clock
        self._guard = threading.Lock()
        self._locks: dict[str, threading.Lock] = {}
        self._index = TaskIndex(tasks_dir)
        self._journal = JournalWriter(self._locked)
        # This process's run (``harness/tasks/run_lock.py``), begun on first use.
        self._runs = run_lock.FileRuns(tasks_dir / run_lock.RUNS_FOLDER, clock)

    # ------------------------------------------------------------ the TaskStore protocol

    async def create(
        self,
        description: str,
        thread: ThreadRef | None = None,
        repository: str | None = None,
        requester: str | None = None,
    ) -> Task:
        return await asyncio.to_thread(self._create, description, thread, repository, requester)

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

    async def set_requester(self, slug: str, requester: str) -> Task:
        validate_slug(slug)
        return await asyncio.to_thread(
            self._update, slug, lambda task: dataclasses.replace(task, requester=requester)
        )

    async def list(self) -> builtins.list[Task]:
        return await asyncio.to_thread(self._list)

    async def summaries(self) -> builtins.list[TaskSummary]:
        return await asyncio.to_thread(self._summaries)

    async def damaged(self) -> builtins.list[DamagedTask]:
        return await asyncio.to_thread(self._damaged)

    async def repair(self, slug: str) -> RepairReport:
        validate_slug(slug)
        return await asyncio.to_thread(self._repair, slug)

    async def delete(self, slug: str) -> None:
        validate_slug(slug)
        await self.flush()  # the task's queued lines land in it, not in a later namesake
        await asyncio.to_thread(self._delete, slug)

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
        """Write every queued log line, end the writer, close the index and end the run."""
        try:
            await self._journal.close()
            await asyncio.to_thread(self._index.close)
        finally:
            self._runs.end()

    async def begin_run(self) -> str:
        return await self._runs.begin_run()

    async def run_alive(self, run_id: str) -> bool:
        return await self._runs.run_alive(run_id)

    async def ended_runs(self) -> builtins.list[str]:
        return await self._runs.ended_runs()

    async def forget_run(self, run_id: str) -> None:
        await self._runs.forget_run(run_id)

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
        """The task; TaskNotFoundError, or TaskDamagedError when task.json cannot be read
        (so no read-modify-write ever overwrites a damaged file)."""
        file = self._folder(slug) / TASK_FILE
        try:
            task, _ = read_task_file(file, slug=slug)
        except (FileNotFoundError, NotADirectoryError) as exc:
            raise TaskNotFoundError(slug) from exc
        except HarnessError as exc:
            raise damaged_error(slug, file, exc) from exc
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

    def _create(
        self,
        description: str,
        thread: ThreadRef | None,
        repository: str | None,
        requester: str | None,
    ) -> Task:
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
        task = Task(
            slug,
            creation_time(self._clock.now()),
            description,
            thread=thread,
            repository=repository,
            requester=requester,
        )
        with self._locked(slug):
            self._commit(task)
        logger.info("created task %s", slug)
        return task

    def _update(self, slug: str, change: Callable[[Task], Task]) -> Task:
        with self._locked(slug):
            task = change(self._read(slug))
            self._commit(task)
        return task

    def _delete(self, slug: str) -> None:
        with self._locked(slug) as folder:
            if not (folder / TASK_FILE).exists():
                raise TaskNotFoundError(slug)  # a folder still being created is no task yet
            # Renamed first, under the task's lock: the task leaves listings and lookups at
            # once, and a crash mid-way leaves a dot folder (never read as a task) that the
            # next delete removes.
            trash = self.tasks_dir / f"{_TRASH_PREFIX}{slug}-{self._clock.token(4)}"
            os.rename(folder, trash)
            self._index.forget(slug)
        with os.scandir(self.tasks_dir) as entries:
            leftovers = [entry.path for entry in entries if entry.name.startswith(_TRASH_PREFIX)]
        for path in leftovers:
            shutil.rmtree(path, ignore_errors=True)
        logger.info("deleted task %s", slug)

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
                # The index keeps a damaged task's thread: it is this thread's task, unread.
                damaged: TaskDamagedError | None = None
                for slug in self._index.slugs_of_thread(thread):
                    try:
                        task = self._read(slug)
                    except TaskNotFoundError:
                        continue
                    except TaskDamagedError as exc:
                        damaged = damaged or exc
                        continue
                    if task.thread == thread:
                        return task
                if damaged is not None and refresh:
                    raise damaged
            return None

        return self._with_index(
            from_index, lambda tasks: next((t for t in tasks if t.thread == thread), None)
        )

    def _damaged(self) -> builtins.list[DamagedTask]:
        try:
            return self._index.damaged()
        except sqlite3.Error as exc:
            logger.warning(
                "index %s unusable (%s): reading every task.json instead", self._index.file, exc
            )
        found = []
        for slug in self._slugs_on_disk():
            try:
                self._read(slug)
            except TaskDamagedError as exc:
                thread = salvaged_thread(Path(exc.file), slug=slug)
                found.append(DamagedTask(slug, exc.file, exc.problem, thread))
            except TaskNotFoundError:
                continue
        return found

    def _repair(self, slug: str) -> RepairReport:
        """Set a damaged task.json aside (never deleted: ``task.json.damaged-<UTC time>``) and
        write a fresh one of what still reads; nothing to do for a task that reads fine."""
        with self._locked(slug) as folder:
            file = folder / TASK_FILE
            try:
                self._read(slug)
                return RepairReport(slug)
            except TaskDamagedError:
                pass
            try:
                with open(file, "rb") as handle:
                    data = handle.read()
                    mtime = os.fstat(handle.fileno()).st_mtime
            except OSError as exc:
                raise HarnessError(
                    f"{os.path.abspath(file)}: cannot read the damaged task file ({exc})",
                    fix="check the file's permissions, then run the repair again",
                ) from exc
            found = salvage(data, slug=slug, file=file, file_time=mtime)
            aside = set_aside(file, self._clock.now())
            self._commit(found.task)
        logger.info("repaired task %s: the damaged task.json is kept as %s", slug, aside)
        return RepairReport(slug, str(aside), found.kept, found.dropped)

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
        tasks = [
            task for name in self._slugs_on_disk() if (task := self._read_quietly(name)) is not None
        ]
        return newest_first(tasks)

    def _slugs_on_disk(self) -> builtins.list[str]:
        try:
            names = sorted(entry.name for entry in os.scandir(self.tasks_dir))
        except FileNotFoundError:
            return []
        return [name for name in names if SLUG_RE.match(name)]


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
