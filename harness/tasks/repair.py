"""What of a damaged task.json still reads: the part of the task store that repairs tasks.

``salvage`` takes the bytes of a task.json that does not parse and keeps every part that
still validates on its own, with the same rules as ``task_json.parse_task``:

- of a truncated or garbled file, the longest start that is JSON once its open brackets are
  closed (a file cut off mid-write keeps everything before the cut);
- then each top-level field, each dispatch record, each decision and each allowed rule on its
  own: a bad optional field is dropped from its record, a record whose required field is bad
  is dropped whole, and a missing ``created`` is taken from the first dispatch's start (else
  the file's time).

It says what it kept and what it dropped, and why, so ``harness repair`` can tell the person.
Pure apart from reading the file in ``salvaged_thread``.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from harness.clock import file_stamp, timestamp
from harness.errors import HarnessError
from harness.tasks.model import Task, ThreadRef

# The schema task.json is validated against, to word each problem as task_json does.
from harness.tasks.task_json import parse_task

# The lists whose items are salvaged one by one.
_LISTS = ("dispatches", "decisions", "allowed")
# Enough for any real file; bounds the work on a hostile one.
_MAX_ROUNDS = 20
_MAX_PREFIX_TRIES = 200

_Loc = tuple[str | int, ...]


@dataclass(frozen=True)
class Salvage:
    task: Task
    kept: tuple[str, ...]  # what the task kept, in a few words each
    dropped: tuple[str, ...]  # each part left out, with its path and why


def salvage(data: bytes, *, slug: str, file: Path, file_time: float) -> Salvage:
    """Everything of ``data`` (a task.json that does not parse) that still reads; ``file``
    names it in messages, ``file_time`` (its mtime) dates a task with no readable date."""
    # pydantic's parts are imported when a file is salvaged: the store's modules import this
    # one, and a listing that salvages nothing loads no pydantic.
    from harness.problems import describe

    dropped: list[str] = []
    doc = _load(data, dropped)
    if not isinstance(doc, dict):
        if doc is not None:
            dropped.append(f"everything (the file holds {describe(doc)}, not a JSON object)")
        doc = {}
    check = _Checker(slug, file)

    lists: dict[str, list[Any]] = {}
    for name in _LISTS:
        value = doc.pop(name, None)
        if value is None:
            continue
        if not isinstance(value, list):
            dropped.append(f"{name} (expected a list, found {describe(value)})")
            continue
        lists[name] = []
        for index, item in enumerate(value):
            kept = check.prune(item, check.in_list(name), f"{name}[{index}]")
            dropped += kept.notes
            if kept.value is not None:
                lists[name].append(kept.value)

    dispatches = lists.get("dispatches", [])
    first_start = min((d["startedAt"] for d in dispatches), default=None)
    if not isinstance(doc.get("created"), str):
        found = f"found {describe(doc['created'])}" if "created" in doc else "missing"
        source = "the first dispatch's start" if first_start else "the file's time"
        doc["created"] = first_start or _iso(file_time)
        dropped.append(f"created ({found}; set to {doc['created']}, {source})")
    top = check.prune(doc, check.whole, "")
    dropped += top.notes
    fields = top.value if top.value is not None else {"created": doc["created"]}
    described = "the description"
    if not isinstance(fields.get("description"), str) and dispatches:
        prompt = dispatches[0].get("prompt")
        if isinstance(prompt, str) and prompt.strip():
            fields["description"] = prompt
            described = "the first dispatch's prompt as the description"

    task = parse_task(_encode({**fields, **lists}), file=file, slug=slug)
    return Salvage(task, _kept(task, described), tuple(dropped))


def salvaged_thread(file: Path, *, slug: str) -> ThreadRef | None:
    """The Slack thread a damaged task.json still names; None when it names none (or the
    file cannot be read at all)."""
    try:
        with open(file, "rb") as handle:
            data = handle.read()
            mtime = os.fstat(handle.fileno()).st_mtime
        return salvage(data, slug=slug, file=file, file_time=mtime).task.thread
    except (OSError, HarnessError):
        return None


# ---------------------------------------------------------------- JSON that does not parse


def _load(data: bytes, dropped: list[str]) -> Any:
    """The JSON in ``data``, or in its longest start that parses once closed; None when
    nothing of it does. Says in ``dropped`` what was cut."""
    text = data.decode("utf-8", errors="replace")
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        stop = exc.pos
        reason = exc.msg.removesuffix(" starting at").lower()
    where = f"not valid JSON from line {text.count(chr(10), 0, stop) + 1} on: {reason}"
    found = _longest_start(text, stop)
    dropped.append(f"{'everything' if found is None else 'the rest of the file'} ({where})")
    return found


def _longest_start(text: str, stop: int) -> Any:
    """The longest ``text[:end]`` (end <= stop, where parsing failed) that is JSON once its
    open brackets are closed, parsed; None when there is none."""
    closers: list[str] = []
    ends: list[tuple[int, str]] = []  # (end, the closing brackets it needs)
    in_string = escaped = False
    for index, char in enumerate(text[:stop]):
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
                ends.append((index + 1, "".join(reversed(closers))))
            continue
        if char == '"':
            in_string = True
        elif char in "{[":
            closers.append("}" if char == "{" else "]")
        elif char in "}]":
            if not closers or closers[-1] != char:
                break
            closers.pop()
            ends.append((index + 1, "".join(reversed(closers))))
        elif char == ",":
            ends.append((index, "".join(reversed(closers))))
    for end, closing in reversed(ends[-_MAX_PREFIX_TRIES:]):
        try:
            return json.loads(text[:end] + closing)
        except json.JSONDecodeError:
            continue
    return None


# ---------------------------------------------------------------- fields that do not validate


@dataclass(frozen=True)
class _Pruned:
    value: Any  # None when nothing of it is valid
    notes: list[str]


@dataclass(frozen=True)
class _Error:
    loc: _Loc
    missing: bool  # a required key is missing (else the value at loc is wrong)
    problem: str  # as task_json words it: what is wrong, and what was found


class _Checker:
    def __init__(self, slug: str, file: Path) -> None:
        self.slug = slug
        self.file = file

    def errors(self, doc: dict[str, Any], *, strip: int) -> list[_Error]:
        """parse_task's complaints about ``doc`` (with a stand-in ``created`` when it has
        none), each location less its first ``strip`` parts."""
        from pydantic import ValidationError

        from harness import serialise
        from harness.problems import problems

        try:
            parse_task(_encode({"created": "", **doc}), file=self.file, slug=self.slug)
        except HarnessError as exc:
            cause = exc.__cause__
            if not isinstance(cause, ValidationError):
                raise
            worded = problems(cause, serialise.schema(Task))
            return [
                _Error(tuple(error["loc"])[strip:], error["type"] == "missing", said.problem)
                for error, said in zip(cause.errors(), worded, strict=True)
            ]
        return []

    def whole(self, doc: Any) -> list[_Error]:
        return self.errors(doc, strip=0)

    def in_list(self, name: str) -> Callable[[Any], list[_Error]]:
        """The errors of one item of the list ``name``, located within the item."""

        def errors(item: Any) -> list[_Error]:
            return self.errors({name: [item]}, strip=2)

        return errors

    def prune(self, value: Any, errors_of: Callable[[Any], list[_Error]], name: str) -> _Pruned:
        """``value`` less each part that fails validation, round after round: a bad value
        is removed; a required key missing (or just removed) removes the object lacking it.
        The notes name each removed part (under ``name``) and why."""
        why: dict[_Loc, str] = {}
        for _ in range(_MAX_ROUNDS):
            errors = errors_of(value)
            if not errors:
                return _Pruned(
                    value, [f"{_path(name, at)} ({reason})" for at, reason in why.items()]
                )
            targets: set[_Loc] = set()
            for error in errors:
                loc = error.loc
                if error.missing:
                    target = loc[:-1]
                    reason = f"{_path('', loc[-1:])}: {why.pop(loc, error.problem)}"
                else:
                    target = loc
                    reason = error.problem
                why.setdefault(target, reason)
                targets.add(target)
            if () in targets:  # nothing of it is valid
                return _Pruned(None, [f"{name or 'everything'} ({why[()]})"])
            for target in sorted(targets, key=_sort_key, reverse=True):
                _remove(value, target)
        return _Pruned(None, [f"{name or 'everything'} (still invalid after repairs)"])


def _path(name: str, loc: _Loc) -> str:
    text = name
    for part in loc:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else part)
    return text


def _sort_key(loc: _Loc) -> tuple[tuple[int, str], ...]:
    """Deeper and later parts first when reversed; list indexes sort as numbers."""
    return tuple((part, "") if isinstance(part, int) else (0, part) for part in loc)


def _remove(value: Any, loc: _Loc) -> None:
    container = value
    try:
        for part in loc[:-1]:
            container = container[part]
        del container[loc[-1]]
    except (KeyError, IndexError, TypeError):
        pass  # already gone with its parent


def _encode(doc: dict[str, Any]) -> bytes:
    return json.dumps(doc, ensure_ascii=False).encode("utf-8")


def _iso(seconds: float) -> str:
    return timestamp(datetime.fromtimestamp(seconds, UTC), precise=True)


def _kept(task: Task, described: str) -> tuple[str, ...]:
    kept = [f"created {task.created}"]
    if task.description:
        kept.append(described)
    if task.thread is not None:
        kept.append(f"the Slack thread {task.thread.channel}/{task.thread.thread_ts}")
    if task.repository is not None:
        kept.append(f"the repository {task.repository}")
    for name, items in (
        ("dispatch record", task.dispatches),
        ("decision", task.decisions),
        ("allowed rule", task.allowed),
    ):
        if items:
            kept.append(f"{len(items)} {name}{'s' if len(items) != 1 else ''}")
    return tuple(kept)


def set_aside(file: Path, moment: datetime) -> Path:
    """A second name for ``file``, ``task.json.damaged-<UTC time>``, that keeps its bytes when
    task.json is replaced (a hard link, else a copy)."""
    stamp = file_stamp(moment)
    for attempt in range(1, 1000):
        aside = file.with_name(
            f"{file.name}.damaged-{stamp}" + (f"-{attempt}" if attempt > 1 else "")
        )
        try:
            os.link(file, aside)
        except FileExistsError:
            continue
        except OSError:  # a file system without hard links
            try:
                with open(aside, "xb") as copy:
                    copy.write(file.read_bytes())
            except FileExistsError:
                continue
        return aside
    raise HarnessError(
        f"{file.parent}: too many damaged copies of task.json",
        fix="move the task.json.damaged-* files elsewhere, then run the repair again",
    )
