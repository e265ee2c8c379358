"""The SQLite ledger: what a front end has already seen, and what it still owes people, kept
in ``<tasks dir>/.ledger.sqlite3`` so that a restart forgets neither (one process; replicas
share ``NatsLedger``, and ``Ledger`` in ledger_protocol.py is what both promise).

- **Seen keys** (``remember``, ``recent``, ``claim``): delivered event ids and handled
  messages, so an event delivered again after a restart is not run twice; a button that must
  act once claims its key.
- **Watches** (``watch``, ``watches``): the agents a front end shows in a thread, with what
  it needs to settle them (where the status message is, whom to react to). A watch whose
  agent ended while nobody was watching is settled at the next start.
- **Intake** (``remember(..., intake=)``, ``intake``, ``annotate_intake``, ``handled``): a
  request taken on but not yet handed to an agent (or answered), with what the front end
  noted about it since (e.g. that it waits for a person's choice). Kept in the same step as
  its seen key, so a stop in between never leaves a request marked seen that nobody will act
  on; a watch or an owed reply ends it.
- **The outbox** (``owe``, ``pending``, ``advance``, ``postpone``, ``delivered``,
  ``give_up``): messages owed to a thread, as a list of steps in JSON the front end defines.
  An entry is stored before its first attempt; ``step`` says how far delivery got, so a retry
  never repeats a step that succeeded. ``owe`` can settle a watch in the same transaction:
  either the watch or its owed result exists, never neither.

The ledger does not interpret the JSON it keeps. Every call runs on one worker thread that
owns the SQLite connection, so the event loop never waits on the disk. A ledger file that
SQLite cannot read is moved aside (``.ledger.sqlite3.damaged-<time>``) and a new one started.

A write the disk refuses (it is full, or failing) raises ``LedgerUnwritableError``, and
``problem`` says why until a write succeeds again: the front end keeps what it could not
write and tries again (bot/backlog.py). A full disk is never taken for a damaged file.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import sqlite3
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

from harness.clock import SYSTEM, Clock, file_stamp
from harness.tasks.ledger_protocol import JSON as JSON
from harness.tasks.ledger_protocol import Ledger as Ledger
from harness.tasks.ledger_protocol import LedgerClaimLostError as LedgerClaimLostError
from harness.tasks.ledger_protocol import LedgerUnwritableError as LedgerUnwritableError
from harness.tasks.ledger_protocol import Owed as Owed

logger = logging.getLogger(__name__)

LEDGER_FILE = ".ledger.sqlite3"
T = TypeVar("T")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS seen (key TEXT PRIMARY KEY, at REAL NOT NULL);
CREATE INDEX IF NOT EXISTS seen_at ON seen (at);
CREATE TABLE IF NOT EXISTS watches (agent_id TEXT PRIMARY KEY, data TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS outbox (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    lane TEXT NOT NULL,
    data TEXT NOT NULL,
    step INTEGER NOT NULL DEFAULT 0,
    attempts INTEGER NOT NULL DEFAULT 0,
    due REAL NOT NULL,
    state TEXT NOT NULL DEFAULT 'pending',
    error TEXT,
    created REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS outbox_state ON outbox (state, id);
CREATE TABLE IF NOT EXISTS intake (key TEXT PRIMARY KEY, data TEXT NOT NULL, at REAL NOT NULL);
"""


# SQLite's answers that say the file is fine but the disk is not (full, failing, read-only):
# never a reason to move the ledger aside.
_DISK_ERRORS = frozenset(
    {"SQLITE_FULL", "SQLITE_IOERR", "SQLITE_CANTOPEN", "SQLITE_READONLY", "SQLITE_PERM"}
)


def _disk_error(exc: BaseException) -> bool:
    if isinstance(exc, OSError):
        return True
    if not isinstance(exc, sqlite3.DatabaseError):
        return False
    name = str(getattr(exc, "sqlite_errorname", "") or "")
    if name:
        return any(name.startswith(kind) for kind in _DISK_ERRORS)
    text = str(exc).lower()
    return "disk" in text or "readonly" in text or "unable to open" in text


class SqliteLedger:
    """Times are epoch seconds of ``clock``'s wall time: they outlive the process, so a
    monotonic time would mean nothing after a restart."""

    def __init__(self, file: Path | None, clock: Clock = SYSTEM) -> None:
        self.file = file
        self.clock = clock
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="ledger")
        self._db: sqlite3.Connection | None = None
        self._closed = False
        # Why the ledger cannot be written now (its disk is full, say); None while it can.
        self.problem: str | None = None
        self.shared = False  # one process's

    @classmethod
    async def open(cls, file: Path | None, clock: Clock = SYSTEM) -> SqliteLedger:
        """The ledger in ``file`` (made if missing), opened now rather than on first use;
        None keeps it in memory (tests)."""
        ledger = cls(file, clock)
        await ledger._call(ledger._conn, writes=False)
        return ledger

    async def close(self) -> None:
        """Closes the database; safe to call twice."""
        if self._closed:
            return
        self._closed = True
        await asyncio.get_running_loop().run_in_executor(self._executor, self._disconnect)
        self._executor.shutdown(wait=True)

    # -- seen keys -------------------------------------------------------------------------

    async def remember(
        self,
        keys: Iterable[str],
        at: float | None = None,
        *,
        intake: Mapping[str, JSON] | None = None,
    ) -> None:
        """Note ``keys`` as seen at ``at`` (now by default; a key seen before keeps its time),
        and, in the same step, the requests of ``intake`` as taken on."""
        when = self._now() if at is None else at
        rows = [(key, when) for key in keys]
        taken = [(key, _dump(data), when) for key, data in (intake or {}).items()]

        def write() -> None:
            db = self._conn()
            with db:
                db.executemany("INSERT OR IGNORE INTO seen (key, at) VALUES (?, ?)", rows)
                db.executemany("INSERT OR IGNORE INTO intake (key, data, at) VALUES (?, ?, ?)",
                               taken)  # fmt: skip

        if rows or taken:
            await self._call(write)

    async def intake(self) -> list[tuple[str, JSON, float]]:
        """Requests taken on and not handled yet, oldest first: (key, data, when)."""

        def read(db: sqlite3.Connection) -> list[tuple[str, JSON, float]]:
            rows = db.execute("SELECT key, data, at FROM intake ORDER BY at").fetchall()
            return [(str(key), json.loads(data), float(at)) for key, data, at in rows]

        return await self._call(lambda: read(self._conn()), writes=False)

    async def annotate_intake(self, key: str, **fields: Any) -> None:
        """Adds ``fields`` to the kept request ``key`` (nothing when it is not kept)."""

        def update(db: sqlite3.Connection) -> None:
            with db:
                row = db.execute("SELECT data FROM intake WHERE key = ?", (key,)).fetchone()
                if row is not None:
                    data = _dump({**json.loads(row[0]), **fields})
                    db.execute("UPDATE intake SET data = ? WHERE key = ?", (data, key))

        await self._call(lambda: update(self._conn()))

    async def handled(self, key: str) -> None:
        """The request ``key`` is handled (an agent watched, a reply owed, or nothing to do)."""
        await self._write("DELETE FROM intake WHERE key = ?", [(key,)])

    async def claim(self, key: str, *, intake: tuple[str, JSON] | None = None) -> bool:
        """True for the one caller that sees ``key`` first, across restarts too; that caller's
        request ``intake`` (key, data) is taken on in the same step."""

        def insert(db: sqlite3.Connection) -> bool:
            with db:
                now = self._now()
                cursor = db.execute(
                    "INSERT OR IGNORE INTO seen (key, at) VALUES (?, ?)", (key, now)
                )
                if cursor.rowcount == 1 and intake is not None:
                    db.execute("INSERT OR IGNORE INTO intake (key, data, at) VALUES (?, ?, ?)",
                               (intake[0], _dump(intake[1]), now))  # fmt: skip
            return cursor.rowcount == 1

        return await self._call(lambda: insert(self._conn()))

    async def claimed(self, key: str) -> bool:
        def read(db: sqlite3.Connection) -> bool:
            return db.execute("SELECT 1 FROM seen WHERE key = ?", (key,)).fetchone() is not None

        return await self._call(lambda: read(self._conn()))

    async def recent(self, since: float) -> list[tuple[str, float]]:
        """The keys seen at or after ``since``, oldest first; older ones are forgotten."""

        def read(db: sqlite3.Connection) -> list[tuple[str, float]]:
            # Forgetting is housekeeping: a disk that refuses it still answers the read.
            with contextlib.suppress(sqlite3.OperationalError), db:
                db.execute("DELETE FROM seen WHERE at < ?", (since,))
            rows = db.execute("SELECT key, at FROM seen ORDER BY at").fetchall()
            return [(str(key), float(at)) for key, at in rows]

        return await self._call(lambda: read(self._conn()), writes=False)

    # -- watches ---------------------------------------------------------------------------

    async def watch(self, agent_id: str, data: JSON, *, handles: str | None = None) -> None:
        """Start (or update) the watch of an agent; it handles the request ``handles``."""

        def write() -> None:
            db = self._conn()
            with db:
                db.execute(
                    "INSERT OR REPLACE INTO watches (agent_id, data) VALUES (?, ?)",
                    (agent_id, _dump(data)),
                )
                if handles is not None:
                    db.execute("DELETE FROM intake WHERE key = ?", (handles,))

        await self._call(write)

    async def watches(self) -> list[tuple[str, JSON]]:
        def read(db: sqlite3.Connection) -> list[tuple[str, JSON]]:
            rows = db.execute("SELECT agent_id, data FROM watches ORDER BY rowid").fetchall()
            return [(str(agent_id), json.loads(data)) for agent_id, data in rows]

        return await self._call(lambda: read(self._conn()), writes=False)

    async def unwatch(self, agent_id: str) -> None:
        await self._write("DELETE FROM watches WHERE agent_id = ?", [(agent_id,)])

    # -- the outbox ------------------------------------------------------------------------

    async def owe(
        self, lane: str, data: JSON, *, settles: str | None = None, handles: str | None = None
    ) -> int:
        """Store an entry, due now; with ``settles``, that agent's watch ends in the same
        transaction, and with ``handles`` that request is handled. The entry's id."""
        entry_id = await self.owe_once(None, lane, data, settles=settles, handles=handles)
        assert entry_id is not None
        return entry_id

    async def owe_once(
        self,
        claim: str | None,
        lane: str,
        data: JSON,
        *,
        settles: str | None = None,
        handles: str | None = None,
        drops: Sequence[int] = (),
    ) -> int | None:
        """``owe``, claiming ``claim`` in the same transaction: None (nothing stored) when
        it was claimed before, so a stop can never leave it claimed and not owed. The
        pending entries ``drops`` go in that step too, whichever way (it takes their place)."""

        def insert(db: sqlite3.Connection) -> int | None:
            now = self._now()
            with db:
                db.executemany("DELETE FROM outbox WHERE id = ? AND state = 'pending'",
                               [(entry_id,) for entry_id in drops])  # fmt: skip
                if (
                    claim is not None
                    and db.execute(
                        "INSERT OR IGNORE INTO seen (key, at) VALUES (?, ?)", (claim, now)
                    ).rowcount
                    != 1
                ):
                    return None
                cursor = db.execute(
                    "INSERT INTO outbox (lane, data, due, created) VALUES (?, ?, ?, ?)",
                    (lane, _dump(data), now, now),
                )
                if settles is not None:
                    db.execute("DELETE FROM watches WHERE agent_id = ?", (settles,))
                if handles is not None:
                    db.execute("DELETE FROM intake WHERE key = ?", (handles,))
            assert cursor.lastrowid is not None
            return cursor.lastrowid

        return await self._call(lambda: insert(self._conn()))

    async def pending(self) -> list[Owed]:
        """Every entry not yet delivered nor given up, oldest first."""

        def read(db: sqlite3.Connection) -> list[Owed]:
            rows = db.execute(
                "SELECT id, lane, data, step, attempts, due, error FROM outbox "
                "WHERE state = 'pending' ORDER BY id"
            ).fetchall()
            return [
                Owed(int(i), str(lane), json.loads(data), int(step), int(tries), float(due), err)
                for i, lane, data, step, tries, due, err in rows
            ]

        return await self._call(lambda: read(self._conn()), writes=False)

    async def advance(self, entry_id: int, step: int) -> None:
        """Steps before ``step`` are done."""
        await self._write("UPDATE outbox SET step = ? WHERE id = ?", [(step, entry_id)])

    async def postpone(self, entry_id: int, due: float, error: str) -> None:
        """A transient failure: try again at ``due``."""
        await self._write(
            "UPDATE outbox SET attempts = attempts + 1, due = ?, error = ? WHERE id = ?",
            [(due, error, entry_id)],
        )

    async def delivered(self, entry_id: int) -> None:
        await self._write("DELETE FROM outbox WHERE id = ?", [(entry_id,)])

    async def give_up(self, entry_id: int, error: str) -> None:
        """A permanent failure: kept with its reason, never tried again."""
        await self._write(
            "UPDATE outbox SET state = 'failed', error = ?, attempts = attempts + 1 WHERE id = ?",
            [(error, entry_id)],
        )

    async def failed(self) -> list[Owed]:
        """Entries given up on, oldest first (for people to look at)."""

        def read(db: sqlite3.Connection) -> list[Owed]:
            rows = db.execute(
                "SELECT id, lane, data, step, attempts, due, error FROM outbox "
                "WHERE state = 'failed' ORDER BY id"
            ).fetchall()
            return [
                Owed(int(i), str(lane), json.loads(data), int(step), int(tries), float(due), err)
                for i, lane, data, step, tries, due, err in rows
            ]

        return await self._call(lambda: read(self._conn()), writes=False)

    # -- the worker thread -----------------------------------------------------------------

    def _now(self) -> float:
        return self.clock.now().timestamp()

    async def _call(self, fn: Callable[[], T], *, writes: bool = True) -> T:
        """``fn()`` on the worker thread; a write that succeeds ends a ``problem``."""
        if self._closed:
            raise RuntimeError("the ledger is closed")
        try:
            result = await asyncio.get_running_loop().run_in_executor(self._executor, fn)
        except (sqlite3.DatabaseError, OSError) as exc:
            if not _disk_error(exc):
                raise
            self._unwritable(exc)
            raise LedgerUnwritableError(
                f"cannot write {self.file or 'the ledger'}: {exc}",
                fix=f"free space on the volume of {self.file.parent if self.file else '-'}",
            ) from exc
        if writes and self.problem is not None:
            logger.warning("the ledger %s is writable again", self.file)
            self.problem = None
        return result

    def _unwritable(self, exc: BaseException) -> None:
        """One warning when the ledger stops taking writes (not one per write)."""
        why = f"{self.file or 'the ledger'} cannot be written: {exc}"
        if self.problem is None:
            logger.warning("%s; what it cannot take is kept in memory until it can", why)
        self.problem = why

    async def probe(self) -> None:
        """A write that changes nothing people see: raises ``LedgerUnwritableError`` while the
        disk refuses it (tried again to learn when it takes writes again)."""
        await self._write("INSERT OR REPLACE INTO seen (key, at) VALUES (?, ?)",
                          [("ledger:probe", self._now())])  # fmt: skip

    async def _write(self, sql: str, rows: Sequence[tuple[Any, ...]]) -> None:
        def write() -> None:
            db = self._conn()
            with db:
                db.executemany(sql, rows)

        await self._call(write)

    def _conn(self) -> sqlite3.Connection:
        if self._db is None:  # opened on first use, on the worker thread that owns it
            self._connect()
        assert self._db is not None
        return self._db

    def _connect(self) -> None:
        try:
            self._db = _connect(self.file)
        except sqlite3.DatabaseError as exc:
            if _disk_error(exc):  # a full disk, not a damaged file: raised, kept as it is
                raise
            assert self.file is not None  # an in-memory database is never damaged
            aside = self.file.with_name(f"{self.file.name}.damaged-{file_stamp(self.clock.now())}")
            logger.error("%s is unreadable (%s): moved to %s", self.file, exc, aside)
            self.file.replace(aside)
            for suffix in ("-wal", "-shm"):
                with contextlib.suppress(FileNotFoundError):
                    self.file.with_name(self.file.name + suffix).unlink()
            self._db = _connect(self.file)

    def _disconnect(self) -> None:
        if self._db is not None:
            self._db.close()
            self._db = None


def _connect(file: Path | None) -> sqlite3.Connection:
    if file is not None:
        file.parent.mkdir(parents=True, exist_ok=True)
    db = sqlite3.connect(":memory:" if file is None else file)
    try:
        # WAL with NORMAL sync: a committed write survives the process being killed.
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=NORMAL")
        db.execute("PRAGMA busy_timeout=5000")
        db.executescript(_SCHEMA)
        db.execute("SELECT count(*) FROM outbox").fetchone()
    except sqlite3.DatabaseError:
        db.close()
        raise
    return db


def _dump(data: JSON) -> str:
    return json.dumps(data, ensure_ascii=False, separators=(",", ":"))
