"""The task index: ``<tasks dir>/.index.sqlite3``, a derived cache of the task.json files.

The files are the truth; the index only saves reading them all. Per task it keeps what a
listing shows (created, description, dispatch count, thread, last role and status, the task's
status and cost) and the fingerprint (mtime_ns, size, inode) of the task.json it was taken
from; per agent, its task and status. Writers update it under the task's lock right after
writing task.json.

Listings first ``refresh``: one scandir of the tasks folder plus a stat of each task.json;
rows whose fingerprint differs, or is missing, are re-read from task.json and rows of
vanished folders are dropped. Lookups by agent or thread skip that: the caller reads the
task.json the index points at (the truth) and refreshes only on a miss or a mismatch. So
hand edits, ``git pull`` and a crash between writing task.json and updating the index never
show stale data. A missing index is built from the files; a corrupt one is deleted (with a
warning) and rebuilt.

A task.json that cannot be read keeps its row, marked with the problem: listings skip it and
``damaged`` lists it. The row keeps what the index knew of the task (its thread above all,
so the task's Slack thread still belongs to it); a row built from the damaged file alone
takes the thread from what of the file still reads (``harness/tasks/repair.py``).

The SQLite file itself (tables, connection, the SQL writing rows) is ``index_db.py``'s.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import sqlite3
from pathlib import Path
from typing import Any, cast, get_args

from harness.errors import HarnessError, repair_command
from harness.tasks.common import (
    INDEX_FILE,
    SLUG_RE,
    TASK_FILE,
    DamagedTask,
    damaged_error,
)
from harness.tasks.index_db import (
    NEWEST_FIRST,
    SPEND_COLUMNS,
    IndexDb,
    drop_tasks,
    put_damaged,
    put_task,
    transaction,
)
from harness.tasks.model import (
    FINAL_STATUSES,
    DispatchStatus,
    Task,
    TaskSummary,
    ThreadRef,
)
from harness.tasks.repair import salvaged_thread
from harness.tasks.spending import Spend
from harness.tasks.task_json import Fingerprint, read_task_file

logger = logging.getLogger(__name__)

_NOT_FINAL = tuple(status for status in get_args(DispatchStatus) if status not in FINAL_STATUSES)

_SUMMARIES = (
    "SELECT slug, mtime_ns, size, ino, created, description, dispatch_count, channel, "
    f"thread_ts, last_role, last_status, status, cost_usd, cost_simulated, problem, requester, "
    "pull_request "
    f"FROM tasks {NEWEST_FIRST}"
)
_Row = tuple[Any, ...]  # the columns of _SUMMARIES, in that order


class TaskIndex:
    """One per store object, with its own connection (``IndexDb``); every method blocks, so
    callers run them in worker threads."""

    def __init__(self, tasks_dir: Path) -> None:
        self.tasks_dir = tasks_dir
        self.file = tasks_dir / INDEX_FILE
        self._db = IndexDb(self.file)
        self._spending_fresh = False  # ``spending`` refreshed the index once

    # ------------------------------------------------------------ queries

    def summaries(self) -> list[TaskSummary]:
        """Every readable task, newest first, after a refresh."""
        return self.listing()[0]

    def listing(self) -> tuple[list[TaskSummary], list[DamagedTask]]:
        """``summaries`` and ``damaged`` from one refresh and one query (a listing shows
        both: a second scan of the tasks folder would double its cost)."""
        on_disk = _scan(self.tasks_dir)
        if on_disk is None:
            return [], []

        def rows() -> list[_Row]:
            return self._db.use(lambda db: db.execute(_SUMMARIES).fetchall())

        found = rows()
        # The fingerprints come with the rows: one query when nothing changed on disk.
        if self._catch_up(on_disk, {row[0]: row[1:4] for row in found}):
            found = rows()
        summaries = []
        damaged = []
        for row in found:
            slug, created, description, count, channel, ts, role, last, status, cost, simulated = (
                row[0],
                *row[4:14],
            )
            problem, requester, pull_request = row[14], row[15], row[16]
            thread = ThreadRef(channel, ts) if channel is not None and ts is not None else None
            if problem is not None:
                file = os.path.abspath(self.tasks_dir / slug / TASK_FILE)
                # One bad file must not hide every other task: say so on every listing.
                logger.warning(
                    "skipping task %s: %s: %s (run `%s`)",
                    slug,
                    file,
                    problem,
                    repair_command(slug),
                )
                damaged.append(DamagedTask(slug=slug, file=file, problem=problem, thread=thread))
                continue
            summaries.append(
                _summary(
                    slug,
                    created,
                    description,
                    count,
                    thread,
                    role,
                    last,
                    status,
                    cost,
                    bool(simulated),
                    requester,
                    pull_request,
                )
            )
        damaged.sort(key=lambda task: task.slug)  # as ``damaged`` lists them
        return summaries, damaged

    def damaged(self) -> list[DamagedTask]:
        """Every task whose task.json cannot be read, by slug, after a refresh."""
        if not self.refresh():
            return []
        rows = self._db.use(
            lambda db: db.execute(
                "SELECT slug, problem, channel, thread_ts FROM tasks "
                "WHERE problem IS NOT NULL ORDER BY slug"
            ).fetchall()
        )
        return [
            DamagedTask(
                slug=slug,
                file=os.path.abspath(self.tasks_dir / slug / TASK_FILE),
                problem=problem,
                thread=ThreadRef(channel, ts) if channel is not None and ts is not None else None,
            )
            for slug, problem, channel, ts in rows
        ]

    def slugs_of_agent(self, agent_id: str) -> list[str]:
        """The tasks the index says hold the agent, newest first (no refresh: callers check
        the task.json they read, and refresh on a miss)."""
        return self._slugs(
            f"SELECT agents.slug FROM agents JOIN tasks USING (slug) "
            f"WHERE agents.agent_id = ? {NEWEST_FIRST}",
            (agent_id,),
        )

    def slugs_of_thread(self, thread: ThreadRef) -> list[str]:
        """Like ``slugs_of_agent``, for the tasks bound to a Slack thread (damaged ones too)."""
        return self._slugs(
            f"SELECT slug FROM tasks WHERE channel = ? AND thread_ts = ? {NEWEST_FIRST}",
            (thread.channel, thread.thread_ts),
        )

    def unfinished(self) -> list[tuple[str, str]]:
        """(slug, agent id) of every dispatch not in a final status, newest task first."""
        if not self.refresh():
            return []
        marks = ", ".join("?" for _ in _NOT_FINAL)
        rows = self._db.use(
            lambda db: db.execute(
                f"SELECT agents.slug, agents.agent_id FROM agents JOIN tasks USING (slug) "
                f"WHERE agents.status IN ({marks}) {NEWEST_FIRST}, agents.rowid",
                _NOT_FINAL,
            ).fetchall()
        )
        return cast(list[tuple[str, str]], rows)

    def spending(self, since: str) -> list[Spend]:
        """The spending rows of agents that started on or after the UTC day ``since``
        (damaged tasks keep the rows the index had of them). Refreshed on the first call
        only: writers update the index as they write, and listings refresh it, so a limit
        check before every agent does not stat every task.json."""
        if not self._spending_fresh:
            if not self.refresh():
                return []
            self._spending_fresh = True
        elif not self.tasks_dir.is_dir():
            return []
        rows = self._db.use(
            lambda db: db.execute(
                f"SELECT {SPEND_COLUMNS} FROM spend WHERE day >= ?", (since,)
            ).fetchall()
        )
        return [Spend(*row) for row in rows]

    def _slugs(self, sql: str, args: tuple[str, ...]) -> list[str]:
        if not self.tasks_dir.is_dir():
            return []
        rows = self._db.use(lambda db: db.execute(sql, args).fetchall())
        return [row[0] for row in rows]

    # ------------------------------------------------------------ keeping it fresh

    def refresh(self) -> bool:
        """Bring every row in line with the task.json files on disk (see the module doc);
        False when there is no tasks folder (and nothing was created)."""
        on_disk = _scan(self.tasks_dir)
        if on_disk is None:
            return False
        known = self._db.use(
            lambda db: db.execute("SELECT slug, mtime_ns, size, ino FROM tasks").fetchall()
        )
        self._catch_up(
            on_disk, {slug: (mtime_ns, size, ino) for slug, mtime_ns, size, ino in known}
        )
        return True

    def _catch_up(self, on_disk: dict[str, Fingerprint], known: dict[str, Fingerprint]) -> bool:
        """Re-read the task.json files whose fingerprint differs from the index's, drop the
        rows of vanished folders; False when there was nothing to do."""
        stale = [slug for slug, print_ in on_disk.items() if known.get(slug) != print_]
        vanished = [slug for slug in known if slug not in on_disk]
        if not stale and not vanished:
            return False
        fresh: list[tuple[Task | DamagedTask, Fingerprint]] = []
        for slug in stale:  # read without holding the index: this is the slow part
            file = self.tasks_dir / slug / TASK_FILE
            try:
                task, print_ = read_task_file(file, slug=slug)
                fresh.append((task, print_))
            except (FileNotFoundError, NotADirectoryError):
                vanished.append(slug)  # removed since the scan
            except HarnessError as exc:
                error = damaged_error(slug, file, exc)
                thread = salvaged_thread(file, slug=slug)
                fresh.append((DamagedTask(slug, error.file, error.problem, thread), on_disk[slug]))
        if len(stale) > 100:
            logger.info("index %s: re-read %d task files", self.file, len(stale))

        def apply(db: sqlite3.Connection) -> None:
            with transaction(db):
                drop_tasks(db, vanished)
                for task, print_ in fresh:
                    if isinstance(task, DamagedTask):
                        put_damaged(db, task, print_)
                    else:
                        put_task(db, task, print_)

        self._db.use(apply)
        return True

    def put(self, task: Task, print_: Fingerprint) -> None:
        """Record the task.json just written. A failure only costs a re-read later."""

        def write(db: sqlite3.Connection) -> None:
            with transaction(db):
                put_task(db, task, print_)

        try:
            self._db.use(write)
        except sqlite3.Error as exc:
            logger.warning("index %s not updated for task %s: %s", self.file, task.slug, exc)

    def forget(self, slug: str) -> None:
        """Drop a deleted task's rows. A failure only costs a refresh later (its folder is
        gone, so the next listing drops them)."""

        def drop_rows(db: sqlite3.Connection) -> None:
            with transaction(db):
                drop_tasks(db, [slug])

        try:
            self._db.use(drop_rows)
        except sqlite3.Error as exc:
            logger.warning("index %s not updated for deleted task %s: %s", self.file, slug, exc)

    def close(self) -> None:
        self._db.close()


_SUMMARY_FIELDS = tuple(field.name for field in dataclasses.fields(TaskSummary))


def _summary(*values: Any) -> TaskSummary:
    """A TaskSummary of ``values`` (its fields in order), made without the frozen dataclass's
    ``__init__``, which sets each field through ``object.__setattr__``: that was a third of
    the Python time of listing 10,000 tasks. The index wrote the row from a TaskSummary of
    a task.json it read; there is nothing to check."""
    summary = object.__new__(TaskSummary)
    summary.__dict__.update(zip(_SUMMARY_FIELDS, values, strict=True))
    return summary


def _scan(tasks_dir: Path) -> dict[str, Fingerprint] | None:
    """slug -> fingerprint of its task.json, for every task folder; None without a folder.
    Folders without task.json (a task being created, a stray folder) are not tasks."""
    try:
        entries = os.scandir(tasks_dir)
    except FileNotFoundError:
        return None
    found: dict[str, Fingerprint] = {}
    with entries:
        for entry in entries:
            if not SLUG_RE.match(entry.name):
                continue  # dot files (this index, locks) and anything that is not a slug
            try:
                stat = os.stat(f"{entry.path}/{TASK_FILE}")
            except (FileNotFoundError, NotADirectoryError):
                continue
            found[entry.name] = (stat.st_mtime_ns, stat.st_size, stat.st_ino)
    return found
