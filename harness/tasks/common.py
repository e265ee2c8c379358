"""Rules both task stores share: slugs, the names of files in a task folder, creation times,
ordering, and how a dispatch record replaces an earlier one."""

from __future__ import annotations

import dataclasses
import os
import re
import threading
import unicodedata
from collections.abc import Container, Iterable
from datetime import UTC, datetime, timedelta
from pathlib import Path, PurePosixPath

from harness.clock import timestamp
from harness.errors import (
    AgentNotFoundError,
    HarnessError,
    InvalidSlugError,
    TaskDamagedError,
    repair_command,
)
from harness.tasks.model import DispatchRecord, Task, ThreadRef

TASK_FILE = "task.json"
LOCK_FILE = ".lock"
JOURNALS = "journals"
DIFFS = "diffs"
# A dot name: never a valid slug, so listings never mistake it (or its -wal/-shm) for a task.
INDEX_FILE = ".index.sqlite3"
# The final records the store could not take yet (``harness/agents/pending_finals.py``).
PENDING_FOLDER = ".pending"
SLUG_RE = re.compile(r"^[a-z0-9](?:[a-z0-9-]{0,62}[a-z0-9])?$")
_MAX_WORDS = 6
_MAX_SLUG_CHARS = 48
# Agent ids and log names become file names: no separators, no leading dot (hidden / `..`).
_NAME_PART_RE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$")


@dataclasses.dataclass(frozen=True)
class DamagedTask:
    """A task whose task.json is there but cannot be read: listings skip it, so front ends
    list these apart, with the way to repair them."""

    slug: str
    file: str  # the absolute path of its task.json
    problem: str  # what is wrong, without the file: "corrupt task file: dispatches[0]..."
    # The Slack thread it was bound to, when the damaged file or the index still says so.
    thread: ThreadRef | None = None

    @property
    def repair(self) -> str:
        """The command that repairs it."""
        return repair_command(self.slug)

    def error(self) -> TaskDamagedError:
        return TaskDamagedError(self.slug, self.file, self.problem)


@dataclasses.dataclass(frozen=True)
class RepairReport:
    """What ``repair`` did to a task: nothing (``moved_to`` None: its task.json read fine),
    or which damaged file it set aside and what of it the fresh task.json kept and dropped."""

    slug: str
    moved_to: str | None = None
    kept: tuple[str, ...] = ()
    dropped: tuple[str, ...] = ()

    @property
    def repaired(self) -> bool:
        return self.moved_to is not None


def damaged_error(slug: str, file: Path, exc: HarnessError) -> TaskDamagedError:
    """``exc`` (task.json could not be read or parsed) as the task's TaskDamagedError."""
    if isinstance(exc, TaskDamagedError):
        return exc
    where = os.path.abspath(file)
    problem = exc.message.removeprefix(f"{where}: ")
    return TaskDamagedError(slug, where, problem, by_hand=exc.fix)


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


def diff_file_name(agent_id: str) -> str:
    """Where an agent's diff is kept, relative to the task folder (``diffFile``)."""
    return f"{DIFFS}/{_check_part(agent_id, 'agent id')}.diff"


def _check_part(part: str, what: str) -> str:
    if not _NAME_PART_RE.match(part) or part in {".", ".."}:
        raise HarnessError(
            f"invalid {what} {part!r}",
            fix="use letters, digits, `_`, `.` and `-` only, not starting with a dot",
        )
    return part


def check_file_name(name: str) -> PurePosixPath:
    """A file name inside the task folder: ``audit.jsonl`` or ``journals/x.jsonl``, nothing
    else (task.json excepted)."""
    path = PurePosixPath(name)
    if path.is_absolute() or not 1 <= len(path.parts) <= 2 or name.endswith("/"):
        raise HarnessError(
            f"invalid file name {name!r}: it must stay inside the task folder",
            fix="use a file name, optionally in one subfolder, e.g. `journals/<agent>.jsonl`",
        )
    for part in path.parts:
        _check_part(part, "file name part")
    if path.name == TASK_FILE:
        raise HarnessError(
            f"invalid file name {name!r}", fix="task.json is written by the task store only"
        )
    return path


_clock_lock = threading.Lock()
_last_created = datetime.min.replace(tzinfo=UTC)


def creation_time(moment: datetime) -> str:
    """``moment`` (a clock's now) as a task's creation time: ISO 8601 UTC, strictly
    increasing within the process so "newest first" never ties."""
    global _last_created
    with _clock_lock:
        if moment <= _last_created:
            moment = _last_created + timedelta(microseconds=1)
        _last_created = moment
    return timestamp(moment, precise=True)


def created_key(created: str) -> float:
    """What "newest first" sorts on: the POSIX time of ``created``; -inf when unparsable, so
    a task with a hand-mangled date is listed last rather than hidden."""
    try:
        moment = datetime.fromisoformat(created)
    except ValueError:
        return float("-inf")
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.timestamp()


def newest_first(tasks: Iterable[Task]) -> list[Task]:
    """Newest first; equal times fall back to the slug, descending, as the file store's
    index orders them, so both stores list ties alike."""
    return sorted(tasks, key=lambda task: (created_key(task.created), task.slug), reverse=True)


def upsert(task: Task, record: DispatchRecord) -> Task:
    """The task with ``record`` replacing the one of the same agent, else appended."""
    dispatches = list(task.dispatches)
    for index, existing in enumerate(dispatches):
        if existing.agent_id == record.agent_id:
            dispatches[index] = record
            break
    else:
        dispatches.append(record)
    return dataclasses.replace(task, dispatches=tuple(dispatches))


def record_in(tasks: Iterable[Task], agent_id: str) -> DispatchRecord:
    """The agent's record in the first task that has it; AgentNotFoundError otherwise."""
    for task in tasks:
        for record in task.dispatches:
            if record.agent_id == agent_id:
                return record
    raise AgentNotFoundError(agent_id)


def with_rule(task: Task, rule: str) -> Task:
    """The task with ``rule`` among its granted permission rules (once)."""
    if rule in task.allowed:
        return task
    return dataclasses.replace(task, allowed=(*task.allowed, rule))
