"""Reading tasks for the file store: one task from its task.json, and the lookups across
tasks (listings, by agent, by thread, unfinished dispatches, damaged tasks).

The index (``harness/tasks/index.py``) answers the lookups across tasks; the task.json files it
points at are read for the truth. When SQLite cannot be used at all (a read-only tasks
folder, a lock held too long) every task.json is read instead, so the store still answers.

Every method blocks: the store runs them in worker threads.
"""

from __future__ import annotations

import logging
import os
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from harness.errors import (
    AgentNotFoundError,
    HarnessError,
    TaskDamagedError,
    TaskNotFoundError,
)
from harness.tasks.common import (
    SLUG_RE,
    TASK_FILE,
    DamagedTask,
    damaged_error,
    newest_first,
    record_in,
    validate_slug,
)
from harness.tasks.index import TaskIndex
from harness.tasks.model import FINAL_STATUSES, DispatchRecord, Task, TaskSummary, ThreadRef
from harness.tasks.repair import salvaged_thread
from harness.tasks.spending import Spend, spending_since
from harness.tasks.task_json import read_task_file

logger = logging.getLogger(__name__)

T = TypeVar("T")


def read_listing(tasks_dir: Path) -> tuple[list[TaskSummary], list[DamagedTask]]:
    """What ``FileTaskStore.listing`` answers for ``tasks_dir``, read in this thread: for a
    command that runs no event loop (``harness tasks``), so that it loads neither asyncio nor
    the store's writers."""
    index = TaskIndex(tasks_dir)
    try:
        return TaskLookups(tasks_dir, index).listing()
    finally:
        index.close()


class TaskLookups:
    """The file store's reads: no locks taken, since task.json is only ever replaced whole
    (atomically), so a reader sees one version or the other."""

    def __init__(self, tasks_dir: Path, index: TaskIndex) -> None:
        self.tasks_dir = tasks_dir
        self._index = index

    def read(self, slug: str) -> Task:
        """The task; TaskNotFoundError, or TaskDamagedError when task.json cannot be read
        (so no read-modify-write ever overwrites a damaged file)."""
        file = self.tasks_dir / validate_slug(slug) / TASK_FILE
        try:
            task, _ = read_task_file(file, slug=slug)
        except (FileNotFoundError, NotADirectoryError) as exc:
            raise TaskNotFoundError(slug) from exc
        except HarnessError as exc:
            raise damaged_error(slug, file, exc) from exc
        return task

    def read_quietly(self, slug: str) -> Task | None:
        """The task, or None (with a warning when its file is corrupt): for lookups that
        must not fail because of one bad task."""
        try:
            return self.read(slug)
        except TaskNotFoundError:
            return None
        except HarnessError as exc:
            logger.warning("skipping task %s: %s", slug, exc)
            return None

    def summaries(self) -> list[TaskSummary]:
        return self._with_index(
            self._index.summaries, lambda tasks: [TaskSummary.of(task) for task in tasks]
        )

    def listing(self) -> tuple[list[TaskSummary], list[DamagedTask]]:
        """``summaries`` and ``damaged`` together, from one scan of the tasks folder."""
        return self._with_index(
            self._index.listing,
            lambda tasks: ([TaskSummary.of(task) for task in tasks], self.damaged()),
        )

    def tasks(self) -> list[Task]:
        def from_index() -> list[Task]:
            slugs = [summary.slug for summary in self._index.summaries()]
            return [task for slug in slugs if (task := self.read_quietly(slug)) is not None]

        return self._with_index(from_index, lambda tasks: tasks)

    def record(self, agent_id: str) -> DispatchRecord:
        def from_index() -> DispatchRecord:
            # The index points at the task; its task.json (the truth) gives the record. A
            # miss refreshes the index once: the agent may come from a hand edit or a pull.
            for refresh in (False, True):
                if refresh:
                    self._index.refresh()
                for slug in self._index.slugs_of_agent(agent_id):
                    task = self.read_quietly(slug)
                    for record in task.dispatches if task else ():
                        if record.agent_id == agent_id:
                            return record
            raise AgentNotFoundError(agent_id)

        return self._with_index(from_index, lambda tasks: record_in(tasks, agent_id))

    def knows_agent(self, agent_id: str) -> bool:
        def fallback(tasks: list[Task]) -> bool:
            return any(r.agent_id == agent_id for t in tasks for r in t.dispatches)

        return self._with_index(lambda: bool(self._index.slugs_of_agent(agent_id)), fallback)

    def find_by_thread(self, thread: ThreadRef) -> Task | None:
        def from_index() -> Task | None:
            for refresh in (False, True):
                if refresh:
                    self._index.refresh()
                # The index keeps a damaged task's thread: it is this thread's task, unread.
                damaged: TaskDamagedError | None = None
                for slug in self._index.slugs_of_thread(thread):
                    try:
                        task = self.read(slug)
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

    def unfinished(self) -> list[tuple[str, DispatchRecord]]:
        """(slug, record) of every queued or running dispatch."""

        def from_index() -> list[tuple[str, DispatchRecord]]:
            # Only the tasks the index names are read; their files decide the statuses.
            slugs = dict.fromkeys(slug for slug, _ in self._index.unfinished())
            tasks = [task for slug in slugs if (task := self.read_quietly(slug)) is not None]
            return _unfinished_in(tasks)

        return self._with_index(from_index, _unfinished_in)

    def spending(self, since: str) -> list[Spend]:
        return self._with_index(
            lambda: self._index.spending(since), lambda tasks: spending_since(tasks, since)
        )

    def damaged(self) -> list[DamagedTask]:
        try:
            return self._index.damaged()
        except sqlite3.Error as exc:
            logger.warning(
                "index %s unusable (%s): reading every task.json instead", self._index.file, exc
            )
        found = []
        for slug in self._slugs_on_disk():
            try:
                self.read(slug)
            except TaskDamagedError as exc:
                thread = salvaged_thread(Path(exc.file), slug=slug)
                found.append(DamagedTask(slug, exc.file, exc.problem, thread))
            except TaskNotFoundError:
                continue
        return found

    def _with_index(self, answer: Callable[[], T], fallback: Callable[[list[Task]], T]) -> T:
        """``answer()`` from the index; if SQLite cannot be used at all (a read-only tasks
        folder, a lock held too long), ``fallback`` over every task read from its file."""
        try:
            return answer()
        except sqlite3.Error as exc:
            logger.warning(
                "index %s unusable (%s): reading every task.json instead", self._index.file, exc
            )
            return fallback(self._read_all())

    def _read_all(self) -> list[Task]:
        tasks = [
            task for name in self._slugs_on_disk() if (task := self.read_quietly(name)) is not None
        ]
        return newest_first(tasks)

    def _slugs_on_disk(self) -> list[str]:
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
