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
"""

from __future__ import annotations

import logging
import os
import sqlite3
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar, cast, get_args

from harness.errors import HarnessError, repair_command
from harness.tasks.common import (
    INDEX_FILE,
    SLUG_RE,
    TASK_FILE,
    DamagedTask,
    created_key,
    damaged_error,
)
from harness.tasks.model import (
    FINAL_STATUSES,
    DispatchStatus,
    Task,
    TaskSummary,
    ThreadRef,
)
from harness.tasks.repair import salvaged_thread
from harness.tasks.task_json import Fingerprint, read_task_file

logger = logging.getLogger(__name__)

T = TypeVar("T")

# Bump when the tables change: an index of another version is dropped and rebuilt.
_VERSION = 4
_TABLES = (
    # problem is set when task.json could not be read: listings skip the row, damaged()
    # lists it (see the module doc).
    """CREATE TABLE tasks (
        slug TEXT PRIMARY KEY,
        created TEXT NOT NULL,
        created_key REAL NOT NULL,
        description TEXT NOT NULL,
        dispatch_count INTEGER NOT NULL,
        channel TEXT,
        thread_ts TEXT,
        last_role TEXT,
        last_status TEXT,
        status TEXT,
        cost_usd REAL,
        cost_simulated INTEGER NOT NULL DEFAULT 0,
        mtime_ns INTEGER NOT NULL,
        size INTEGER NOT NULL,
        ino INTEGER NOT NULL,
        problem TEXT
    )""",
    "CREATE INDEX tasks_thread ON tasks (channel, thread_ts)",
    """CREATE TABLE agents (
        agent_id TEXT NOT NULL,
        slug TEXT NOT NULL,
        status TEXT NOT NULL,
        PRIMARY KEY (agent_id, slug)
    )""",
    "CREATE INDEX agents_slug ON agents (slug)",
)
_NEWEST_FIRST = "ORDER BY tasks.created_key DESC, tasks.slug DESC"
_NOT_FINAL = tuple(status for status in get_args(DispatchStatus) if status not in FINAL_STATUSES)
_CORRUPT_CODES = {sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB}

_SUMMARIES = (
    "SELECT slug, mtime_ns, size, ino, created, description, dispatch_count, channel, "
    f"thread_ts, last_role, last_status, status, cost_usd, cost_simulated, problem "
    f"FROM tasks {_NEWEST_FIRST}"
)
_Row = tuple[Any, ...]  # the columns of _SUMMARIES, in that order


class TaskIndex:
    """One guarded connection per store object; every method blocks, so callers run them in
    worker threads. SQLite's WAL mode and busy timeout let several processes share the file."""

    def __init__(self, tasks_dir: Path) -> None:
        self.tasks_dir = tasks_dir
        self.file = tasks_dir / INDEX_FILE
        self._lock = threading.Lock()
        self._db: sqlite3.Connection | None = None

    # ------------------------------------------------------------ queries

    def summaries(self) -> list[TaskSummary]:
        """Every readable task, newest first, after a refresh."""
        on_disk = _scan(self.tasks_dir)
        if on_disk is None:
            return []

        def rows() -> list[_Row]:
            return self._use(lambda db: db.execute(_SUMMARIES).fetchall())

        found = rows()
        # The fingerprints come with the rows: one query when nothing changed on disk.
        if self._catch_up(on_disk, {row[0]: row[1:4] for row in found}):
            found = rows()
        summaries = []
        for row in found:
            slug, created, description, count, channel, ts, role, last, status, cost, simulated = (
                row[0],
                *row[4:14],
            )
            problem = row[14]
            if problem is not None:
                # One bad file must not hide every other task: say so on every listing.
                logger.warning(
                    "skipping task %s: %s: %s (run `%s`)",
                    slug,
                    os.path.abspath(self.tasks_dir / slug / TASK_FILE),
                    problem,
                    repair_command(slug),
                )
                continue
            thread = ThreadRef(channel, ts) if channel is not None and ts is not None else None
            summaries.append(
                TaskSummary(
                    slug=slug,
                    created=created,
                    description=description,
                    dispatch_count=count,
                    thread=thread,
                    last_role=role,
                    last_status=last,
                    status=status,
                    cost_usd=cost,
                    cost_simulated=bool(simulated),
                )
            )
        return summaries

    def damaged(self) -> list[DamagedTask]:
        """Every task whose task.json cannot be read, by slug, after a refresh."""
        if not self.refresh():
            return []
        rows = self._use(
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
            f"WHERE agents.agent_id = ? {_NEWEST_FIRST}",
            (agent_id,),
        )

    def slugs_of_thread(self, thread: ThreadRef) -> list[str]:
        """Like ``slugs_of_agent``, for the tasks bound to a Slack thread (damaged ones too)."""
        return self._slugs(
            f"SELECT slug FROM tasks WHERE channel = ? AND thread_ts = ? {_NEWEST_FIRST}",
            (thread.channel, thread.thread_ts),
        )

    def unfinished(self) -> list[tuple[str, str]]:
        """(slug, agent id) of every dispatch not in a final status, newest task first."""
        if not self.refresh():
            return []
        marks = ", ".join("?" for _ in _NOT_FINAL)
        rows = self._use(
            lambda db: db.execute(
                f"SELECT agents.slug, agents.agent_id FROM agents JOIN tasks USING (slug) "
                f"WHERE agents.status IN ({marks}) {_NEWEST_FIRST}, agents.rowid",
                _NOT_FINAL,
            ).fetchall()
        )
        return cast(list[tuple[str, str]], rows)

    def _slugs(self, sql: str, args: tuple[str, ...]) -> list[str]:
        if not self.tasks_dir.is_dir():
            return []
        rows = self._use(lambda db: db.execute(sql, args).fetchall())
        return [row[0] for row in rows]

    # ------------------------------------------------------------ keeping it fresh

    def refresh(self) -> bool:
        """Bring every row in line with the task.json files on disk (see the module doc);
        False when there is no tasks folder (and nothing was created)."""
        on_disk = _scan(self.tasks_dir)
        if on_disk is None:
            return False
        known = self._use(
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
            with _transaction(db):
                db.executemany("DELETE FROM tasks WHERE slug = ?", [(s,) for s in vanished])
                db.executemany("DELETE FROM agents WHERE slug = ?", [(s,) for s in vanished])
                for task, print_ in fresh:
                    if isinstance(task, DamagedTask):
                        _put_damaged(db, task, print_)
                    else:
                        _put(db, task, print_)

        self._use(apply)
        return True

    def put(self, task: Task, print_: Fingerprint) -> None:
        """Record the task.json just written. A failure only costs a re-read later."""
        try:
            self._use(lambda db: _put_one(db, task, print_))
        except sqlite3.Error as exc:
            logger.warning("index %s not updated for task %s: %s", self.file, task.slug, exc)

    def forget(self, slug: str) -> None:
        """Drop a deleted task's rows. A failure only costs a refresh later (its folder is
        gone, so the next listing drops them)."""

        def drop(db: sqlite3.Connection) -> None:
            with _transaction(db):
                db.execute("DELETE FROM tasks WHERE slug = ?", (slug,))
                db.execute("DELETE FROM agents WHERE slug = ?", (slug,))

        try:
            self._use(drop)
        except sqlite3.Error as exc:
            logger.warning("index %s not updated for deleted task %s: %s", self.file, slug, exc)

    def close(self) -> None:
        with self._lock:
            if self._db is not None:
                self._db.close()
                self._db = None

    # ------------------------------------------------------------ the connection

    def _use(self, operation: Callable[[sqlite3.Connection], T]) -> T:
        """Run ``operation`` on the connection. A corrupt index is replaced by an empty one
        and the operation retried: lookups then miss, and a miss refreshes, which re-reads
        every task.json."""
        with self._lock:
            try:
                return operation(self._connection())
            except sqlite3.DatabaseError as exc:
                if getattr(exc, "sqlite_errorcode", 0) & 0xFF not in _CORRUPT_CODES:
                    raise
                logger.warning(
                    "index %s is corrupt (%s): rebuilding it from the task.json files",
                    self.file,
                    exc,
                )
                self._discard()
            return operation(self._connection())

    def _connection(self) -> sqlite3.Connection:
        if self._db is None:
            db = sqlite3.connect(
                self.file, timeout=30, isolation_level=None, check_same_thread=False
            )
            try:
                db.execute("PRAGMA journal_mode = WAL")
                # The index is derived data: losing the last commits to a power cut only
                # costs a re-read, so skip the fsync per commit.
                db.execute("PRAGMA synchronous = NORMAL")
                if db.execute("PRAGMA user_version").fetchone()[0] != _VERSION:
                    _create_tables(db)
            except BaseException:
                db.close()
                raise
            self._db = db
        return self._db

    def _discard(self) -> None:
        if self._db is not None:
            self._db.close()
            self._db = None
        for suffix in ("", "-wal", "-shm"):
            Path(f"{self.file}{suffix}").unlink(missing_ok=True)


def _create_tables(db: sqlite3.Connection) -> None:
    with _transaction(db):
        # Checked again inside the write lock: another process may have just done it.
        if db.execute("PRAGMA user_version").fetchone()[0] == _VERSION:
            return
        tables = db.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall()
        for (name,) in tables:
            db.execute(f'DROP TABLE IF EXISTS "{name}"')
        for statement in _TABLES:
            db.execute(statement)
        db.execute(f"PRAGMA user_version = {_VERSION}")


@contextmanager
def _transaction(db: sqlite3.Connection) -> Iterator[None]:
    db.execute("BEGIN IMMEDIATE")
    try:
        yield
    except BaseException:
        db.execute("ROLLBACK")
        raise
    db.execute("COMMIT")


def _put_one(db: sqlite3.Connection, task: Task, print_: Fingerprint) -> None:
    with _transaction(db):
        _put(db, task, print_)


def _put(db: sqlite3.Connection, task: Task, print_: Fingerprint) -> None:
    slug = task.slug
    db.execute("DELETE FROM agents WHERE slug = ?", (slug,))
    summary = TaskSummary.of(task)
    thread = task.thread
    row = (
        slug,
        task.created,
        created_key(task.created),
        task.description,
        len(task.dispatches),
        thread.channel if thread else None,
        thread.thread_ts if thread else None,
        summary.last_role,
        summary.last_status,
        summary.status,
        summary.cost_usd,
        summary.cost_simulated,
    )
    db.executemany(
        "INSERT OR REPLACE INTO agents (agent_id, slug, status) VALUES (?, ?, ?)",
        [(record.agent_id, slug, record.status) for record in task.dispatches],
    )
    db.execute(
        "INSERT OR REPLACE INTO tasks (slug, created, created_key, description, dispatch_count, "
        "channel, thread_ts, last_role, last_status, status, cost_usd, cost_simulated, mtime_ns, "
        "size, ino, problem) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (*row, *print_, None),
    )


def _put_damaged(db: sqlite3.Connection, task: DamagedTask, print_: Fingerprint) -> None:
    """Mark the task's row damaged. A row the index had keeps what it knew (its thread, its
    agents), unless what still reads of the file names another thread."""
    thread = task.thread
    db.execute(
        "INSERT INTO tasks (slug, created, created_key, description, dispatch_count, channel, "
        "thread_ts, mtime_ns, size, ino, problem) VALUES (?, '', ?, '', 0, ?, ?, ?, ?, ?, ?) "
        "ON CONFLICT (slug) DO UPDATE SET mtime_ns = excluded.mtime_ns, size = excluded.size, "
        "ino = excluded.ino, problem = excluded.problem, "
        "channel = coalesce(excluded.channel, tasks.channel), "
        "thread_ts = coalesce(excluded.thread_ts, tasks.thread_ts)",
        (
            task.slug,
            float("-inf"),
            thread.channel if thread else None,
            thread.thread_ts if thread else None,
            *print_,
            task.problem,
        ),
    )


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
