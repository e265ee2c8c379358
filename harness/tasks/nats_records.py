"""What the NATS task store keeps in its key-value bucket, as pure functions: the keys, and
the summaries kept beside the tasks so listings never read the tasks in full.

Summaries are kept in ``SHARDS`` index keys (``index.<n>``, a task's by a hash of its slug),
each a JSON object of slug -> summary: a listing reads a few dozen values, not one per task
(a message per key costs the client tens of microseconds: 10,000 tasks would take a third of
a second). A summary names the revision of the task it was made from, and writers replace one
only with one of a later revision (compare-and-set on the shard), so a slower writer of an
older task never overwrites a newer summary; a task with no summary (its writer died between
the two writes, or it was written by hand) is read in full by the listing that finds it.
"""

from __future__ import annotations

import dataclasses
import json
import zlib
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, get_args

from harness import serialise
from harness.tasks.model import (
    FINAL_STATUSES,
    DispatchStatus,
    Task,
    TaskStatus,
    TaskSummary,
    ThreadRef,
)
from harness.tasks.spending import Spend, spend_of
from harness.tasks.task_json import parse_task

TASK = "task."
INDEX = "index."
# Each shard holds ~1/SHARDS of the summaries (about 350 bytes each): 64 keep every value
# under the server's 1 MB message limit up to about 150,000 tasks.
SHARDS = 64
THREAD = "thread."
AGENT = "agent."
RUN = "run."
LIVE = "live."
TAKEN = "taken."


def task_key(slug: str) -> str:
    return f"{TASK}{slug}"


def index_key(slug: str) -> str:
    """The index shard that keeps the task's summary."""
    return f"{INDEX}{zlib.crc32(slug.encode()) % SHARDS}"


def thread_key(thread: ThreadRef) -> str:
    # Hex: channel ids and timestamps may hold dots, which are key separators.
    return f"{THREAD}{f'{thread.channel}/{thread.thread_ts}'.encode().hex()}"


def taken_key(run_id: str, agent_id: str) -> str:
    """The claim on the agent a stopped run left (ids checked by the caller: hex and
    ``[A-Za-z0-9_-]``, safe in a key)."""
    return f"{TAKEN}{run_id}.{agent_id}"


def agent_key(agent_id: str) -> str:
    return f"{AGENT}{agent_id.encode().hex()}"


def run_key(run_id: str) -> str:
    return f"{RUN}{run_id}"


def live_key(run_id: str) -> str:
    return f"{LIVE}{run_id}"


def where(bucket: str, slug: str) -> str:
    """How a task's stored form is named in messages (in place of task.json's path)."""
    return f"nats:{bucket}/{task_key(slug)}"


def read_task(data: bytes, *, bucket: str, slug: str) -> Task:
    """The task in a ``task.<slug>`` value: task.json's format, read by its one reader."""
    return parse_task(data, file=Path(where(bucket, slug)), slug=slug)


@dataclass(frozen=True)
class Kept:
    """A summary as kept: the line, the task revision it shows and the agents it has not
    seen finish."""

    revision: int
    summary: TaskSummary
    unfinished: tuple[str, ...]
    spend: tuple[Spend, ...] = ()  # ``tasks/spending.py``: what its paid agents spent


def unfinished_of(task: Task) -> tuple[str, ...]:
    return tuple(d.agent_id for d in task.dispatches if d.status not in FINAL_STATUSES)


def summary_entry(task: Task, revision: int) -> dict[str, Any]:
    """The task's entry in its index shard."""
    return {
        "revision": revision,
        "summary": serialise.to_json(TaskSummary.of(task)),
        "unfinished": list(unfinished_of(task)),
        # Positional rows (Spend's fields in order): a year of agents stays a small shard.
        "spend": [list(vars(row).values()) for row in spend_of(task)],
    }


def load_shard(data: bytes | None) -> dict[str, Any]:
    """An index shard's entries by slug; {} for none or a broken one (its tasks are then
    read in full, and the next writer writes the shard anew)."""
    try:
        doc = json.loads(data or b"{}")
    except ValueError:
        return {}
    return doc if isinstance(doc, dict) else {}


def dump_shard(entries: dict[str, Any]) -> bytes:
    return json.dumps(entries, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def entry_revision(entry: Any) -> int:
    """The task revision an entry shows; 0 for a broken one."""
    revision = entry.get("revision") if isinstance(entry, dict) else None
    return revision if isinstance(revision, int) else 0


def load_summaries(
    task_keys: Iterable[str], shards: Iterable[bytes]
) -> tuple[list[Kept], list[str]]:
    """For each ``task.<slug>`` key: its summary, read from the index shards' values, or its
    slug among those without a readable one."""
    entries: dict[str, Any] = {}
    for data in shards:
        entries.update(load_shard(data))
    lines: list[Kept] = []
    missing: list[str] = []
    for key in task_keys:
        slug = key.removeprefix(TASK)
        line = load_summary(entries.get(slug), slug)
        if line is None:
            missing.append(slug)
        else:
            lines.append(line)
    return lines, missing


def load_summary(doc: Any, slug: str) -> Kept | None:
    """A kept summary, or None when the entry is not one (a listing then reads the task).
    Built by hand, not through the serialiser: a listing makes thousands (a tenth of the
    time), and every field's type is still checked."""
    try:
        line = doc["summary"]
        thread = line.get("thread")
        summary = TaskSummary(
            slug=slug,
            created=_text(line["created"]),
            description=_text(line["description"]),
            dispatch_count=_count(line["dispatchCount"]),
            thread=ThreadRef(_text(thread["channel"]), _text(thread["threadTs"]))
            if thread is not None
            else None,
            last_role=_maybe_text(line.get("lastRole")),
            last_status=_one_of(line.get("lastStatus"), _DISPATCH_STATUSES, None),
            status=_one_of(line.get("status"), _TASK_STATUSES, "new"),
            cost_usd=_cost(line.get("costUsd")),
            cost_simulated=line.get("costSimulated") is True,
            requester=_maybe_text(line.get("requester")),
            pull_request=_maybe_text(line.get("pullRequest")),
        )
        unfinished = tuple(map(_text, doc["unfinished"]))
        spend = tuple(_spend(slug, row) for row in doc["spend"])
        return Kept(_count(doc["revision"]), summary, unfinished, spend)
    except (ValueError, TypeError, KeyError, AttributeError):
        return None


_DISPATCH_STATUSES = frozenset(get_args(DispatchStatus))
_TASK_STATUSES = frozenset(get_args(TaskStatus))


def _spend(slug: str, row: object) -> Spend:
    """A spending row of a summary; TypeError when it is not one."""
    if not isinstance(row, list) or len(row) != len(_SPEND_FIELDS) or row[0] != slug:
        raise TypeError(row)
    _, agent_id, day, role, person, channel, routine, repository, cost, held = row
    return Spend(slug, _text(agent_id), _text(day), _text(role), _maybe_text(person),
                 _maybe_text(channel), _maybe_text(routine), _maybe_text(repository),
                 _cost(cost), _cost(held))  # fmt: skip


_SPEND_FIELDS = tuple(field.name for field in dataclasses.fields(Spend))


def _text(value: object) -> str:
    if not isinstance(value, str):
        raise TypeError(value)
    return value


def _maybe_text(value: object) -> str | None:
    return None if value is None else _text(value)


def _count(value: object) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise TypeError(value)
    return value


def _cost(value: object) -> float | None:
    if value is None:
        return None
    if not isinstance(value, int | float) or isinstance(value, bool):
        raise TypeError(value)
    return float(value)


def _one_of(value: object, allowed: frozenset[str], default: Any) -> Any:
    if value is None:
        return default
    if value not in allowed:
        raise ValueError(value)
    return value
