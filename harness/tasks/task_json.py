"""The task.json file format: reading and atomic writing.

Only the task store uses this module. The file is the ``Task`` dataclass in the one JSON form
of ``harness/serialise.py`` (camelCase keys in field order): strict on types (a string where a
number belongs is an error naming the field) and lenient where files written by earlier
versions must keep loading: optional keys may be missing or null, unknown keys are ignored,
and an integer is accepted where a float belongs.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING

from harness.atomic import write_atomic
from harness.errors import HarnessError
from harness.tasks.model import Task

if TYPE_CHECKING:
    from harness import serialise

# What identifies one version of task.json without reading it: (mtime_ns, size, inode).
# Every atomic write makes a new inode, so two writes within one clock tick still differ.
Fingerprint = tuple[int, int, int]


def fingerprint(stat: os.stat_result) -> Fingerprint:
    return (stat.st_mtime_ns, stat.st_size, stat.st_ino)


# ---------------------------------------------------------------- reading


def read_task_file(file: Path, *, slug: str) -> tuple[Task, Fingerprint]:
    """The task in ``file`` and the fingerprint of the very version that was read.

    Raises FileNotFoundError (or NotADirectoryError) when there is no such file, HarnessError
    when it cannot be read or parsed."""
    try:
        with open(file, "rb") as handle:
            stat = os.fstat(handle.fileno())
            data = handle.read()
    except (FileNotFoundError, NotADirectoryError):
        raise  # no such task: the caller decides what that means
    except OSError as exc:
        raise HarnessError(
            f"{os.path.abspath(file)}: unreadable task file ({exc})",
            fix="check the file's permissions, or restore it from version control",
        ) from exc
    return parse_task(data, file=file, slug=slug), fingerprint(stat)


def parse_task(data: bytes, *, file: Path, slug: str) -> Task:
    """The task in ``data`` (task.json's bytes), or HarnessError naming the file, each bad
    field's path (e.g. ``dispatches[0].status``), what was found there, and the fix; its
    cause is pydantic's ValidationError."""
    # Imported here: a listing, which reads the index and no task.json, loads no pydantic.
    from harness import serialise

    try:
        # The folder name is the task's identity, whatever the file says.
        return serialise.load_json(Task, data, given={"slug": slug})
    except serialise.DecodeError as exc:
        raise corrupt_task_file(file, exc) from exc.error


def corrupt_task_file(file: Path, exc: serialise.DecodeError) -> HarnessError:
    """The error for a task.json that does not parse: the absolute file, each bad field's
    path with what is wrong and what was found, and the fix."""
    found = exc.problems
    shown = [f"{problem.path}: {problem.problem}" for problem in found[:3]]
    if len(found) > 3:
        shown.append(f"and {len(found) - 3} more")
    first = found[0]
    from harness.problems import TOP_LEVEL

    where = "" if first.path == TOP_LEVEL else f" at {first.path}"
    return HarnessError(
        f"{os.path.abspath(file)}: corrupt task file: {'; '.join(shown)}",
        fix=f"{first.fix}{where} by hand, or restore {file.name} from version control; the "
        "journals next to it hold every message of each run",
    )


# ---------------------------------------------------------------- writing


def write_task_file(file: Path, task: Task) -> Fingerprint:
    """Atomically replace ``file``: readers and crashes see the old version or the new one,
    never a torn file. Returns the new version's fingerprint."""
    return fingerprint(write_atomic(file, dump_task(task)))


def dump_task(task: Task) -> bytes:
    """task.json's bytes: UTF-8, two-space indents, a final newline (stable, diff-friendly)."""
    from harness import serialise

    data = serialise.to_json(task)
    return (json.dumps(data, indent=2, ensure_ascii=False) + "\n").encode("utf-8")
