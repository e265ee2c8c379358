"""The task index's SQLite file (``<tasks dir>/.index.sqlite3``): its tables and their
version, the one guarded connection to it (WAL, busy timeout, a corrupt file replaced by an
empty one) and the SQL that writes and drops a task's rows.

What the rows hold, when they are written and how they are queried is ``TaskIndex``'s
business (``harness/tasks/index.py``).
"""

from __future__ import annotations

import logging
import sqlite3
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TypeVar

from harness.tasks.common import DamagedTask, created_key
from harness.tasks.model import Task, TaskSummary
from harness.tasks.spending import spend_of
from harness.tasks.task_json import Fingerprint

logger = logging.getLogger(__name__)

T = TypeVar("T")

# Bump when the tables change: an index of another version is dropped and rebuilt.
_VERSION = 7
_TABLES = (
    # problem is set when task.json could not be read: listings skip the row, damaged()
    # lists it (see harness/tasks/index.py).
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
        problem TEXT,
        requester TEXT,
        pull_request TEXT
    )""",
    "CREATE INDEX tasks_thread ON tasks (channel, thread_ts)",
    """CREATE TABLE agents (
        agent_id TEXT NOT NULL,
        slug TEXT NOT NULL,
        status TEXT NOT NULL,
        PRIMARY KEY (agent_id, slug)
    )""",
    "CREATE INDEX agents_slug ON agents (slug)",
    # What each agent that is paid for spent or holds, and who pays (``tasks/spending.py``).
    """CREATE TABLE spend (
        slug TEXT NOT NULL,
        agent_id TEXT NOT NULL,
        day TEXT NOT NULL,
        role TEXT NOT NULL,
        person TEXT,
        channel TEXT,
        routine TEXT,
        repository TEXT,
        cost_usd REAL,
        held_usd REAL
    )""",
    "CREATE INDEX spend_slug ON spend (slug)",
    "CREATE INDEX spend_day ON spend (day)",
)
SPEND_COLUMNS = (
    "slug, agent_id, day, role, person, channel, routine, repository, cost_usd, held_usd"
)
# The order of every listing and lookup, for queries over the tasks table.
NEWEST_FIRST = "ORDER BY tasks.created_key DESC, tasks.slug DESC"
_CORRUPT_CODES = {sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB}


class IndexDb:
    """One connection, opened on first use and guarded by a lock; every method blocks, so
    callers run them in worker threads. SQLite's WAL mode and busy timeout let several
    processes share the file."""

    def __init__(self, file: Path) -> None:
        self.file = file
        self._lock = threading.Lock()
        self._db: sqlite3.Connection | None = None

    def use(self, operation: Callable[[sqlite3.Connection], T]) -> T:
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

    def close(self) -> None:
        with self._lock:
            if self._db is not None:
                self._db.close()
                self._db = None

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
    with transaction(db):
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
def transaction(db: sqlite3.Connection) -> Iterator[None]:
    db.execute("BEGIN IMMEDIATE")
    try:
        yield
    except BaseException:
        db.execute("ROLLBACK")
        raise
    db.execute("COMMIT")


def put_task(db: sqlite3.Connection, task: Task, print_: Fingerprint) -> None:
    """Replace the task's rows (its own and its agents') with what ``task`` says. Callers
    hold a transaction."""
    slug = task.slug
    db.execute("DELETE FROM agents WHERE slug = ?", (slug,))
    db.execute("DELETE FROM spend WHERE slug = ?", (slug,))
    db.executemany(
        f"INSERT INTO spend ({SPEND_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        [tuple(vars(row).values()) for row in spend_of(task)],
    )
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
        "size, ino, problem, requester, pull_request) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (*row, *print_, None, task.requester, summary.pull_request),
    )


def put_damaged(db: sqlite3.Connection, task: DamagedTask, print_: Fingerprint) -> None:
    """Mark the task's row damaged. A row the index had keeps what it knew (its thread, its
    agents), unless what still reads of the file names another thread. Callers hold a
    transaction."""
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


def drop_tasks(db: sqlite3.Connection, slugs: list[str]) -> None:
    """Delete the rows of these tasks (theirs and their agents'). Callers hold a
    transaction."""
    db.executemany("DELETE FROM tasks WHERE slug = ?", [(s,) for s in slugs])
    db.executemany("DELETE FROM agents WHERE slug = ?", [(s,) for s in slugs])
    db.executemany("DELETE FROM spend WHERE slug = ?", [(s,) for s in slugs])
