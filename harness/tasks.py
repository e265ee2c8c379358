"""The task store: ``<tasks dir>/<slug>/task.json`` plus one journal per dispatch.

Only this module reads or writes task.json, and the JSON shape (camelCase keys) is private to
it. Writes are atomic (temp file + fsync + ``os.replace``) and every read-modify-write runs
under a per-task thread lock *and* an ``fcntl.flock`` on ``<slug>/.lock``, so concurrent
agents, threads or processes never lose each other's dispatch records.
"""

from __future__ import annotations

import dataclasses
import fcntl
import json
import logging
import os
import re
import tempfile
import threading
import unicodedata
from collections.abc import Container, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path, PurePosixPath
from typing import Any, Protocol, get_args

from harness.errors import HarnessError, InvalidSlugError, TaskNotFoundError
from harness.results import (
    AgentResult,
    Decision,
    DispatchRecord,
    DispatchStatus,
    Progress,
    Task,
    ThreadRef,
)

logger = logging.getLogger(__name__)

LogEntries = list[dict[str, Any]]

TASK_FILE = "task.json"
LOCK_FILE = ".lock"
JOURNALS = "journals"
SLUG_RE = re.compile(r"^[a-z0-9](?:[a-z0-9-]{0,62}[a-z0-9])?$")
_MAX_WORDS = 6
_MAX_SLUG_CHARS = 48
# Agent ids and log names become file names: no separators, no leading dot (hidden / `..`).
_NAME_PART_RE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$")


class TaskStore(Protocol):
    def create(self, description: str, thread: ThreadRef | None = None) -> Task:
        """A new task with a readable slug made unique from the description."""
        ...

    def get(self, slug: str) -> Task:
        """Raises InvalidSlugError for a malformed slug, TaskNotFoundError for a missing one."""
        ...

    def find_by_thread(self, thread: ThreadRef) -> Task | None: ...

    def bind_thread(self, slug: str, thread: ThreadRef) -> Task: ...

    def list(self) -> list[Task]:
        """All tasks, newest first."""
        ...

    def save_dispatch(self, slug: str, record: DispatchRecord) -> Task:
        """Insert the record, or replace the one with the same agent_id. Atomic; never loses
        a concurrent writer's record."""
        ...

    def add_decision(self, slug: str, decision: Decision) -> Task:
        """Append a decision to the task (atomic, like save_dispatch)."""
        ...

    def journal_path(self, slug: str, agent_id: str) -> Path:
        """Where the dispatch's JSONL journal goes (the folder exists)."""
        ...

    def append_jsonl(self, slug: str, name: str, entry: dict[str, Any]) -> None:
        """Append one JSON line to a per-task log file (journals, audit log)."""
        ...

    def read_jsonl(self, slug: str, name: str) -> LogEntries:
        """The entries of a per-task log file; [] when it does not exist yet."""
        ...


# ---------------------------------------------------------------- pure helpers


def make_slug(description: str, taken: Container[str]) -> str:
    """A readable, unique slug: "Add a settings page!" -> "add-a-settings-page" (-2, -3...)."""
    # Drop apostrophes first so "don't" becomes "dont", not "don-t"; NFKD keeps "café" as "cafe".
    text = re.sub(r"['\u2019]", "", description)
    text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii")
    words: list[str] = []
    length = 0
    for word in re.findall(r"[a-z0-9]+", text.lower()):
        extra = len(word) + (1 if words else 0)
        if len(words) >= _MAX_WORDS or length + extra > _MAX_SLUG_CHARS:
            if not words:  # one very long word: keep its start rather than nothing
                words.append(word[:_MAX_SLUG_CHARS])
            break
        words.append(word)
        length += extra
    base = "-".join(words) or "task"
    slug, counter = base, 1
    while slug in taken:
        counter += 1
        slug = f"{base}-{counter}"
    return slug


def validate_slug(slug: str) -> str:
    """The slug itself, or InvalidSlugError; this is what keeps ``../x`` out of the tasks dir."""
    if not isinstance(slug, str) or not SLUG_RE.match(slug):
        raise InvalidSlugError(str(slug))
    return slug


def journal_file_name(agent_id: str) -> str:
    """The journal's path relative to the task folder, as stored in ``journalFile``."""
    return f"{JOURNALS}/{_check_part(agent_id, 'agent id')}.jsonl"


def _check_part(part: str, what: str) -> str:
    if not _NAME_PART_RE.match(part) or part in {".", ".."}:
        raise HarnessError(
            f"invalid {what} {part!r}",
            fix="use letters, digits, `_`, `.` and `-` only, not starting with a dot",
        )
    return part


def _check_log_name(name: str) -> PurePosixPath:
    """A log name inside the task folder: ``audit.jsonl`` or ``journals/x.jsonl``, nothing else."""
    path = PurePosixPath(name)
    if path.is_absolute() or not 1 <= len(path.parts) <= 2 or name.endswith("/"):
        raise HarnessError(
            f"invalid log name {name!r}: it must stay inside the task folder",
            fix="use a file name, optionally in one subfolder, e.g. `journals/<agent>.jsonl`",
        )
    for part in path.parts:
        _check_part(part, "log name part")
    if path.name == TASK_FILE:
        raise HarnessError(
            f"invalid log name {name!r}", fix="task.json is written by the task store only"
        )
    return path


_clock_lock = threading.Lock()
_last_created = datetime.min.replace(tzinfo=UTC)


def _now() -> str:
    """ISO 8601 UTC, strictly increasing within the process so "newest first" never ties."""
    global _last_created
    with _clock_lock:
        now = datetime.now(UTC)
        if now <= _last_created:
            now = _last_created + timedelta(microseconds=1)
        _last_created = now
    return now.isoformat(timespec="microseconds").replace("+00:00", "Z")


def _created_key(task: Task) -> float:
    try:
        moment = datetime.fromisoformat(task.created)
    except ValueError:
        return float("-inf")  # unparsable dates sort last rather than hide the task
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.timestamp()


def _newest_first(tasks: list[Task]) -> list[Task]:
    # sorted() is stable: equal timestamps keep the order the caller gave.
    return sorted(tasks, key=_created_key, reverse=True)


def _upsert(task: Task, record: DispatchRecord) -> Task:
    dispatches = list(task.dispatches)
    for index, existing in enumerate(dispatches):
        if existing.agent_id == record.agent_id:
            dispatches[index] = record
            break
    else:
        dispatches.append(record)
    return dataclasses.replace(task, dispatches=tuple(dispatches))


def _append_line(path: Path, entry: dict[str, Any]) -> None:
    line = json.dumps(entry, ensure_ascii=False, default=str) + "\n"
    path.parent.mkdir(parents=True, exist_ok=True)
    # Callers hold the task lock, so lines from concurrent writers never interleave.
    with path.open("a", encoding="utf-8") as handle:
        handle.write(line)


def _read_lines(path: Path) -> LogEntries:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return []
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


def _write_json_atomic(path: Path, data: object) -> None:
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    done = False
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            os.fchmod(fd, 0o644)  # mkstemp's 0600 would make task.json unreadable to teammates
            json.dump(data, handle, indent=2, ensure_ascii=False)
            handle.write("\n")
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
        done = True
    finally:
        if not done:
            Path(tmp).unlink(missing_ok=True)


# ---------------------------------------------------------------- task.json (private shape)

# (JSON key, DispatchRecord attribute, JSON type, required); this order is task.json's order.
_DISPATCH_FIELDS: tuple[tuple[str, str, type[Any], bool], ...] = (
    ("agentId", "agent_id", str, True),
    ("role", "role", str, True),
    ("cwd", "cwd", str, False),
    ("model", "model", str, False),
    ("prompt", "prompt", str, False),
    ("parentId", "parent_id", str, False),
    ("startedAt", "started_at", str, True),
    ("completedAt", "completed_at", str, False),
    ("status", "status", str, True),
    ("journalFile", "journal_file", str, False),
    ("costUsd", "cost_usd", float, False),
    ("turns", "turns", int, False),
    ("durationMs", "duration_ms", int, False),
    ("result", "result", dict, False),
    ("error", "error", str, False),
    ("lastText", "last_text", str, False),
    ("hostPid", "host_pid", int, False),
    ("progress", "progress", dict, False),
)


def _task_to_json(task: Task) -> dict[str, Any]:
    thread = task.thread
    return {
        "slug": task.slug,
        "created": task.created,
        "description": task.description,
        "thread": {"channel": thread.channel, "threadTs": thread.thread_ts} if thread else None,
        "dispatches": [_dispatch_to_json(record) for record in task.dispatches],
        "decisions": [_decision_to_json(decision) for decision in task.decisions],
    }


def _dispatch_to_json(record: DispatchRecord) -> dict[str, Any]:
    data = {key: getattr(record, attr) for key, attr, _, _ in _DISPATCH_FIELDS}
    data["result"] = record.result.to_json() if record.result else None
    progress = record.progress
    data["progress"] = (
        {"message": progress.message, "percent": progress.percent, "at": progress.at}
        if progress
        else None
    )
    return data


def _get(data: dict[str, Any], key: str, kind: type[Any], where: str, *, required: bool) -> Any:
    """``data[key]`` checked against ``kind``; ValueError (reported as corrupt) otherwise."""
    value = data.get(key)
    if value is None:
        if required:
            raise ValueError(f"{where}{key} is missing")
        return None
    if kind is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if not isinstance(value, kind) or (isinstance(value, bool) and kind is not bool):
        raise ValueError(f"{where}{key} should be {kind.__name__}, found {value!r}")
    return value


def _object(value: Any, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ValueError(f"{where or 'the file'} should be a JSON object")
    return value


def _dispatch_from_json(value: Any, where: str) -> DispatchRecord:
    data = _object(value, where)
    fields = {
        attr: _get(data, key, kind, f"{where}.", required=required)
        for key, attr, kind, required in _DISPATCH_FIELDS
    }
    if fields["status"] not in get_args(DispatchStatus):
        raise ValueError(f"{where}.status {fields['status']!r} is not a dispatch status")
    for attr in ("cwd", "journal_file", "prompt"):  # plain strings, absent in hand-made files
        fields[attr] = fields[attr] or ""
    fields["result"] = AgentResult.from_json(fields["result"])
    if fields["progress"] is not None:
        raw = fields["progress"]
        fields["progress"] = Progress(
            message=_get(raw, "message", str, f"{where}.progress.", required=True),
            at=_get(raw, "at", str, f"{where}.progress.", required=True),
            percent=_get(raw, "percent", float, f"{where}.progress.", required=False),
        )
    return DispatchRecord(**fields)


def _decision_to_json(decision: Decision) -> dict[str, Any]:
    return {
        "title": decision.title,
        "body": decision.body,
        "at": decision.at,
        "agentId": decision.agent_id,
        "role": decision.role,
    }


def _decision_from_json(value: Any, where: str) -> Decision:
    data = _object(value, where)
    return Decision(
        title=_get(data, "title", str, f"{where}.", required=True),
        body=_get(data, "body", str, f"{where}.", required=True),
        at=_get(data, "at", str, f"{where}.", required=True),
        agent_id=_get(data, "agentId", str, f"{where}.", required=False),
        role=_get(data, "role", str, f"{where}.", required=False),
    )


def _task_from_json(value: Any, *, slug: str) -> Task:
    data = _object(value, "")
    thread_data = data.get("thread")
    thread = None
    if thread_data is not None:
        raw = _object(thread_data, "thread")
        thread = ThreadRef(
            channel=_get(raw, "channel", str, "thread.", required=True),
            thread_ts=_get(raw, "threadTs", str, "thread.", required=True),
        )
    dispatches = data.get("dispatches") or []
    decisions = data.get("decisions") or []
    if not isinstance(dispatches, list) or not isinstance(decisions, list):
        raise ValueError("dispatches and decisions should be lists")
    return Task(
        # The folder name is the task's identity, even if the file was copied from elsewhere.
        slug=slug,
        created=_get(data, "created", str, "", required=True),
        description=_get(data, "description", str, "", required=False) or "",
        thread=thread,
        dispatches=tuple(
            _dispatch_from_json(item, f"dispatches[{index}]")
            for index, item in enumerate(dispatches)
        ),
        decisions=tuple(
            _decision_from_json(item, f"decisions[{index}]") for index, item in enumerate(decisions)
        ),
    )


# ---------------------------------------------------------------- file store


class FileTaskStore:
    """Plain files, one folder per task: git-friendly and safe across processes."""

    def __init__(self, tasks_dir: Path) -> None:
        self.tasks_dir = tasks_dir
        self._guard = threading.Lock()
        self._locks: dict[str, threading.Lock] = {}

    def _folder(self, slug: str) -> Path:
        return self.tasks_dir / validate_slug(slug)

    def _read(self, slug: str) -> Task:
        file = self._folder(slug) / TASK_FILE
        try:
            text = file.read_text(encoding="utf-8")
        except FileNotFoundError as exc:
            raise TaskNotFoundError(slug) from exc
        except (OSError, UnicodeDecodeError) as exc:
            raise _corrupt(file, exc) from exc
        try:
            return _task_from_json(json.loads(text), slug=slug)
        except (ValueError, KeyError, TypeError) as exc:
            raise _corrupt(file, exc) from exc

    def _write(self, task: Task) -> None:
        _write_json_atomic(self._folder(task.slug) / TASK_FILE, _task_to_json(task))

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

    def create(self, description: str, thread: ThreadRef | None = None) -> Task:
        self.tasks_dir.mkdir(parents=True, exist_ok=True)
        taken = {entry.name for entry in self.tasks_dir.iterdir()}
        while True:
            slug = make_slug(description, taken)
            try:
                # mkdir is the atomic claim: two creators never get the same slug.
                (self.tasks_dir / slug).mkdir(exist_ok=False)
            except FileExistsError:
                taken.add(slug)
                continue
            break
        task = Task(slug=slug, created=_now(), description=description, thread=thread)
        self._write(task)
        logger.info("created task %s", slug)
        return task

    def get(self, slug: str) -> Task:
        return self._read(slug)

    def list(self) -> list[Task]:
        if not self.tasks_dir.is_dir():
            return []
        tasks: list[Task] = []
        for folder in sorted(self.tasks_dir.iterdir(), reverse=True):
            if not SLUG_RE.match(folder.name) or not (folder / TASK_FILE).is_file():
                continue  # a task being created, or a stray folder
            try:
                tasks.append(self._read(folder.name))
            except HarnessError as exc:
                # One bad file must not hide every other task; say so loudly instead.
                logger.warning("skipping task %s: %s", folder.name, exc)
        return _newest_first(tasks)

    def find_by_thread(self, thread: ThreadRef) -> Task | None:
        return next((task for task in self.list() if task.thread == thread), None)

    def bind_thread(self, slug: str, thread: ThreadRef) -> Task:
        with self._locked(slug):
            task = dataclasses.replace(self._read(slug), thread=thread)
            self._write(task)
        return task

    def save_dispatch(self, slug: str, record: DispatchRecord) -> Task:
        with self._locked(slug):
            task = _upsert(self._read(slug), _relative_journal(self._folder(slug), record))
            self._write(task)
        return task

    def add_decision(self, slug: str, decision: Decision) -> Task:
        with self._locked(slug):
            current = self._read(slug)
            task = dataclasses.replace(current, decisions=(*current.decisions, decision))
            self._write(task)
        return task

    def journal_path(self, slug: str, agent_id: str) -> Path:
        folder = self._folder(slug)
        if not (folder / TASK_FILE).is_file():
            raise TaskNotFoundError(slug)
        path = folder / journal_file_name(agent_id)
        path.parent.mkdir(exist_ok=True)
        return path

    def append_jsonl(self, slug: str, name: str, entry: dict[str, Any]) -> None:
        relative = _check_log_name(name)
        with self._locked(slug) as folder:
            _append_line(folder / relative, entry)

    def read_jsonl(self, slug: str, name: str) -> LogEntries:
        relative = _check_log_name(name)
        with self._locked(slug) as folder:
            return _read_lines(folder / relative)


def _relative_journal(folder: Path, record: DispatchRecord) -> DispatchRecord:
    """Store journalFile relative to the task folder even if a caller passed the full path."""
    path = Path(record.journal_file)
    if path.is_absolute() and path.is_relative_to(folder):
        return dataclasses.replace(record, journal_file=path.relative_to(folder).as_posix())
    return record


def _corrupt(file: Path, exc: BaseException) -> HarnessError:
    return HarnessError(
        f"{file}: corrupt task file ({exc})",
        fix=f"repair the JSON by hand or restore {file.name} from version control; the journals "
        "next to it hold every message of each run",
    )


# ---------------------------------------------------------------- memory store


class MemoryTaskStore:
    """Tasks in memory (tests, throw-away runs); journals and logs still go to ``journal_dir``."""

    def __init__(self, journal_dir: Path) -> None:
        self.journal_dir = journal_dir
        self._lock = threading.Lock()
        self._tasks: dict[str, Task] = {}

    def _get(self, slug: str) -> Task:
        task = self._tasks.get(validate_slug(slug))
        if task is None:
            raise TaskNotFoundError(slug)
        return task

    def create(self, description: str, thread: ThreadRef | None = None) -> Task:
        with self._lock:
            slug = make_slug(description, self._tasks)
            task = Task(slug=slug, created=_now(), description=description, thread=thread)
            self._tasks[slug] = task
        return task

    def get(self, slug: str) -> Task:
        with self._lock:
            return self._get(slug)

    def list(self) -> list[Task]:
        with self._lock:
            return _newest_first(list(reversed(self._tasks.values())))

    def find_by_thread(self, thread: ThreadRef) -> Task | None:
        return next((task for task in self.list() if task.thread == thread), None)

    def bind_thread(self, slug: str, thread: ThreadRef) -> Task:
        with self._lock:
            task = dataclasses.replace(self._get(slug), thread=thread)
            self._tasks[slug] = task
        return task

    def save_dispatch(self, slug: str, record: DispatchRecord) -> Task:
        with self._lock:
            task = _upsert(self._get(slug), record)
            self._tasks[slug] = task
        return task

    def add_decision(self, slug: str, decision: Decision) -> Task:
        with self._lock:
            current = self._get(slug)
            task = dataclasses.replace(current, decisions=(*current.decisions, decision))
            self._tasks[slug] = task
        return task

    def journal_path(self, slug: str, agent_id: str) -> Path:
        with self._lock:
            self._get(slug)
        path = self.journal_dir / slug / journal_file_name(agent_id)
        path.parent.mkdir(parents=True, exist_ok=True)
        return path

    def append_jsonl(self, slug: str, name: str, entry: dict[str, Any]) -> None:
        relative = _check_log_name(name)
        with self._lock:
            self._get(slug)
            _append_line(self.journal_dir / slug / relative, entry)

    def read_jsonl(self, slug: str, name: str) -> LogEntries:
        relative = _check_log_name(name)
        with self._lock:
            self._get(slug)
            return _read_lines(self.journal_dir / slug / relative)
