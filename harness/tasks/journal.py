"""Per-task log files (agent journals, the audit log): JSON lines queued on the event loop and
appended in batches by a writer task, with ``aiofiles`` on the store's files thread
(``folder_io``).

The rules: ``append`` never blocks (it checks the name, serialises the entry and queues the
line); each file's lines reach the disk in the order they were queued, a batch of one file
in one append; ``flush`` returns once every line queued before it is on disk (or its failure
is logged); a failed write is logged with the file and its lines are dropped, never retried
forever. One writer task at a time, whatever the loop: it starts when lines are queued on a
running loop and ends when the queue is empty, so no task outlives the work; cancelled (the
loop shutting down), it still writes what is queued before it ends (but for a file whose
append the cancel cut short: the files thread ends the step under way, and the file gets
what that step did).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import threading
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from harness.errors import HarnessError
from harness.tasks.common import check_file_name, validate_slug
from harness.tasks.folder_io import FolderIO, FolderOpener

logger = logging.getLogger(__name__)

LogEntries = list[dict[str, Any]]


def said_in(entry: dict[str, Any]) -> list[str]:
    """The text an agent says in one journal entry (an assistant message's text blocks)."""
    blocks = entry.get("content") if entry.get("type") == "AssistantMessage" else None
    if not isinstance(blocks, list):
        return []
    return [b["text"] for b in blocks if isinstance(b, dict) and isinstance(b.get("text"), str)]


def api_retry_in(entry: dict[str, Any]) -> str | None:
    """The progress line for a journal entry that says the CLI retries a failing model API
    call (``"model API unreachable (...), retrying 3/10"``); None for any other entry."""
    if entry.get("type") != "SystemMessage" or entry.get("subtype") != "api_retry":
        return None
    data = entry.get("data")
    data = data if isinstance(data, dict) else {}
    attempt, limit = data.get("attempt", "?"), data.get("max_retries", "?")
    return f"model API unreachable ({api_retry_cause(data)}), retrying {attempt}/{limit}"


def api_retry_cause(data: dict[str, Any]) -> str:
    """Why the CLI retries, from the data of its ``api_retry`` notice
    (``{"attempt": 3, "max_retries": 10, "error_status": 529 | None, "error": "unknown", ...}``)."""
    status, error = data.get("error_status"), data.get("error")
    return f"HTTP {status}" if status else "no connection" if error in (None, "unknown") else error


@dataclass(frozen=True)
class _Line:
    slug: str
    name: PurePosixPath
    text: str


class JournalWriter:
    """The queue and the writer task shared by both task stores; ``files`` is the store's
    file work, on the thread the writer's appends run on."""

    def __init__(self, open_folder: FolderOpener) -> None:
        self.files = FolderIO(open_folder)
        self._lock = threading.Lock()  # guards the fields below; appends come from any thread
        self._pending: list[_Line] = []
        self._queued = 0  # lines ever queued
        self._done = 0  # lines ever written or given up on
        self._waiters: list[tuple[int, asyncio.Future[None]]] = []
        self._loop: asyncio.AbstractEventLoop | None = None
        # The one writer running: batches are taken and written by it alone, which keeps
        # each file's lines in order.
        self._task: asyncio.Task[None] | None = None

    def append(self, slug: str, name: str, entry: dict[str, Any]) -> None:
        """Queue one line for ``<task folder>/<name>``; raises at once for a bad slug or name."""
        line = _Line(
            validate_slug(slug),
            check_file_name(name),
            # Serialised now: the caller may reuse or change the dict after we return.
            json.dumps(entry, ensure_ascii=False, default=str) + "\n",
        )
        with self._lock:
            self._pending.append(line)
            self._queued += 1
            loop = self._loop
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is not None:
            self._start_writer(running)
        elif loop is not None and not loop.is_closed():
            # From a thread without a loop: the writer's loop picks the line up.
            # If that loop closed meanwhile, the next flush writes the line.
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(self._start_writer, loop)
        # No loop anywhere yet: the line waits for the first flush.

    async def flush(self) -> None:
        """Returns when every line queued before the call is on disk (or reported as lost)."""
        loop = asyncio.get_running_loop()
        with self._lock:
            if self._done >= self._queued:
                return
            waiter: asyncio.Future[None] = loop.create_future()
            self._waiters.append((self._queued, waiter))
        self._start_writer(loop)
        await waiter

    async def read(self, slug: str, name: PurePosixPath) -> LogEntries:
        """The entries of a log of the task (its folder taken as for appending), queued lines
        included; [] when it does not exist."""
        await self.flush()
        async with self.files.folder(slug) as folder:
            return await read_log(self.files, folder / name)

    async def close(self) -> None:
        """Flush, then wait for the writer task to end and let the files thread go. Safe to
        call more than once."""
        await self.flush()
        task = self._task
        if task is not None and not task.done() and task.get_loop() is asyncio.get_running_loop():
            await task
        self.files.close()

    # ------------------------------------------------------------ the writer

    def _start_writer(self, loop: asyncio.AbstractEventLoop) -> None:
        """On ``loop``'s thread: make sure a writer task is running."""
        with self._lock:
            self._loop = loop
            task = self._task
            if task is not None and not task.done():
                other = task.get_loop()
                if other is loop or (other.is_running() and not other.is_closed()):
                    return  # it takes the queued lines (a writer on another live loop too)
            # None, or one on a loop that stopped: a writer here takes over.
            self._task = loop.create_task(self._run(), name="journal-writer")

    async def _run(self) -> None:
        me = asyncio.current_task()
        cancelled = False
        try:
            while True:
                with self._lock:
                    # No await between this check and the writer's end: an append either
                    # came before it (and is written) or sees no writer running.
                    batch, self._pending = self._pending, []
                    if not batch:
                        if self._task is me:
                            self._task = None
                        break
                try:
                    cancelled |= await self._write_batch(batch)
                finally:
                    with self._lock:
                        self._done += len(batch)
                    self._wake_flushers()
        except Exception:
            # The writer is a top-level task: nobody else would see this. Later appends
            # start a new writer.
            logger.exception("the log writer failed")
        finally:
            with self._lock:
                if self._task is me:
                    self._task = None
        if cancelled:
            raise asyncio.CancelledError

    def _wake_flushers(self) -> None:
        with self._lock:
            done = self._done
            ready = [waiter for target, waiter in self._waiters if target <= done]
            self._waiters = [(t, w) for t, w in self._waiters if t > done]
        for waiter in ready:
            loop = waiter.get_loop()
            if not waiter.done() and not loop.is_closed():
                loop.call_soon_threadsafe(_resolve, waiter)

    async def _write_batch(self, batch: list[_Line]) -> bool:
        """Append every line of the batch, one write per file; whether the writer was
        cancelled meanwhile (the loop shutting down): it goes on to the end all the same,
        so no line taken is lost."""
        by_task: dict[str, dict[PurePosixPath, list[str]]] = {}
        for line in batch:
            by_task.setdefault(line.slug, {}).setdefault(line.name, []).append(line.text)
        cancelled = False
        for slug, files in by_task.items():
            try:
                cancelled |= await self._write_task(slug, files)
            except asyncio.CancelledError:
                cancelled = True  # cut short; the other tasks' lines are still written
            except (OSError, HarnessError) as exc:
                count = sum(len(texts) for texts in files.values())
                names = ", ".join(str(name) for name in files)
                logger.error("dropped %d log lines of task %s (%s): %s", count, slug, names, exc)
        return cancelled

    async def _write_task(self, slug: str, files: dict[PurePosixPath, list[str]]) -> bool:
        cancelled = False
        async with self.files.folder(slug) as folder:
            for name, texts in files.items():
                try:
                    await _append(folder / name, "".join(texts), len(texts), self.files)
                except asyncio.CancelledError:
                    # The step under way ends on the files thread; the next files still go.
                    cancelled = True
        return cancelled


def _resolve(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)


async def _append(path: Path, text: str, count: int, files: FolderIO) -> None:
    """One O_APPEND write of whole lines: concurrent appenders never split a line."""
    try:
        # Only the last level: the task folder itself must already exist.
        await files.append(path, text.encode("utf-8"))
    except OSError as exc:
        # Not retried: a full disk or a bad path would otherwise block every later line.
        logger.error("could not append %d log lines to %s: %s", count, path, exc)


async def read_log(files: FolderIO, path: Path) -> LogEntries:
    """The JSON objects in a log file, read with ``aiofiles``; [] when it does not exist."""
    return parse_lines(await files.read_text(path) or "", path)


def read_lines(path: Path) -> LogEntries:
    """The JSON objects in a log file; [] when it does not exist (blocking: for tools and
    tests; async code uses ``read_log``)."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return []
    return parse_lines(text, path)


def parse_lines(text: str, path: Path) -> LogEntries:
    """The JSON objects in the text of the log file at ``path``."""
    entries = []
    for number, line in enumerate(text.splitlines(), 1):
        try:
            entry = json.loads(line)
        except ValueError:
            # A crash mid-append leaves at most one torn last line: say so, keep the rest.
            logger.warning("%s:%d: skipping a line that is not JSON", path, number)
            continue
        if isinstance(entry, dict):
            entries.append(entry)
    return entries
