"""The file task store: ``<tasks dir>/<slug>/task.json`` plus per-task log files, and the
index ``<tasks dir>/.index.sqlite3`` that answers listings and lookups without reading every
task.json.

Every read-modify-write of a task runs in a worker thread under a per-task thread lock *and*
an ``fcntl.flock`` on ``<slug>/.lock``, writes task.json atomically and updates the index
before letting go, so concurrent agents, threads or processes never lose each other's
dispatch records.

Reads and the lookups across tasks (with their fall back to every task.json when SQLite is
unusable) are in ``harness/tasks/lookups.py``.

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
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from harness.clock import SYSTEM, Clock
from harness.errors import HarnessError, TaskDamagedError, TaskNotFoundError
from harness.tasks import run_lock
from harness.tasks.common import (
    LOCK_FILE,
    TASK_FILE,
    DamagedTask,
    RepairReport,
    check_file_name,
    creation_time,
    make_slug,
    upsert,
    validate_slug,
    with_rule,
)
from harness.tasks.index import TaskIndex
from harness.tasks.journal import JournalWriter, LogEntries
from harness.tasks.lookups import TaskLookups
from harness.tasks.model import (
    Decision,
    DispatchRecord,
    PullRequest,
    Task,
    TaskSummary,
    ThreadRef,
    Trigger,
)
from harness.tasks.repair import salvage, set_aside
from harness.tasks.spending import Spend
from harness.tasks.task_json import write_task_file

logger = logging.getLogger(__name__)

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
        self._lookups = TaskLookups(tasks_dir, self._index)
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
        trigger: Trigger | None = None,
    ) -> Task:
        return await asyncio.to_thread(
            self._create, description, thread, repository, requester, trigger
        )

    async def get(self, slug: str) -> Task:
        validate_slug(slug)
        return await asyncio.to_thread(self._lookups.read, slug)

    async def find_by_thread(self, thread: ThreadRef) -> Task | None:
        return await asyncio.to_thread(self._lookups.find_by_thread, thread)

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
        return await asyncio.to_thread(self._lookups.tasks)

    async def summaries(self) -> builtins.list[TaskSummary]:
        return await asyncio.to_thread(self._lookups.summaries)

    async def damaged(self) -> builtins.list[DamagedTask]:
        return await asyncio.to_thread(self._lookups.damaged)

    async def listing(self) -> tuple[builtins.list[TaskSummary], builtins.list[DamagedTask]]:
        """``summaries`` and ``damaged`` at once, for a listing that shows both (``harness
        tasks``): one scan of the tasks folder instead of two."""
        return await asyncio.to_thread(self._lookups.listing)

    async def repair(self, slug: str) -> RepairReport:
        validate_slug(slug)
        return await asyncio.to_thread(self._repair, slug)

    async def delete(self, slug: str) -> None:
        validate_slug(slug)
        await self.flush()  # the task's queued lines land in it, not in a later namesake
        await asyncio.to_thread(self._delete, slug)

    async def record(self, agent_id: str) -> DispatchRecord:
        return await asyncio.to_thread(self._lookups.record, agent_id)

    async def knows_agent(self, agent_id: str) -> bool:
        return await asyncio.to_thread(self._lookups.knows_agent, agent_id)

    async def unfinished(self) -> builtins.list[tuple[str, DispatchRecord]]:
        """(slug, record) of every queued or running dispatch, for recovery at start-up."""
        return await asyncio.to_thread(self._lookups.unfinished)

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

    async def raise_limits(self, slug: str, by: str) -> Task:
        validate_slug(slug)
        return await asyncio.to_thread(
            self._update, slug, lambda task: dataclasses.replace(task, limits_raised_by=by)
        )

    async def spending(self, since: str) -> builtins.list[Spend]:
        return await asyncio.to_thread(self._lookups.spending, since)

    async def set_pull_request(self, slug: str, pull_request: PullRequest | None) -> Task:
        validate_slug(slug)
        return await asyncio.to_thread(
            self._update, slug, lambda task: dataclasses.replace(task, pull_request=pull_request)
        )

    def append_jsonl(self, slug: str, name: str, entry: dict[str, Any]) -> None:
        self._journal.append(slug, name, entry)

    async def read_jsonl(self, slug: str, name: str) -> LogEntries:
        validate_slug(slug)
        return await self._journal.read(slug, check_file_name(name))

    # A task's other files: with aiofiles, under the task's lock (``folder_io``).

    async def write_text(self, slug: str, name: str, text: str) -> None:
        validate_slug(slug)
        relative = check_file_name(name)
        async with self._journal.files.folder(slug) as folder:
            await self._journal.files.write_text(folder / relative, text)

    async def read_text(self, slug: str, name: str) -> str | None:
        validate_slug(slug)
        relative = check_file_name(name)
        async with self._journal.files.folder(slug) as folder:
            return await self._journal.files.read_text(folder / relative, errors="replace")

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

    async def take_up(self, run_id: str, agent_id: str) -> bool:
        return await self._runs.take_up(run_id, agent_id)

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

    def _commit(self, task: Task) -> None:
        """Write task.json, then its index row. Callers hold the task's lock."""
        self._index.put(task, write_task_file(self._folder(task.slug) / TASK_FILE, task))

    def _create(
        self,
        description: str,
        thread: ThreadRef | None,
        repository: str | None,
        requester: str | None,
        trigger: Trigger | None = None,
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
            trigger=trigger,
        )
        with self._locked(slug):
            self._commit(task)
        logger.info("created task %s", slug)
        return task

    def _update(self, slug: str, change: Callable[[Task], Task]) -> Task:
        with self._locked(slug):
            task = change(self._lookups.read(slug))
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

    def _repair(self, slug: str) -> RepairReport:
        """Set a damaged task.json aside (never deleted: ``task.json.damaged-<UTC time>``) and
        write a fresh one of what still reads; nothing to do for a task that reads fine."""
        with self._locked(slug) as folder:
            file = folder / TASK_FILE
            try:
                self._lookups.read(slug)
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


def _relative_journal(folder: Path, record: DispatchRecord) -> DispatchRecord:
    """Store journalFile relative to the task folder even if a caller passed the full path."""
    path = Path(record.journal_file)
    if path.is_absolute() and path.is_relative_to(folder):
        return dataclasses.replace(record, journal_file=path.relative_to(folder).as_posix())
    return record
