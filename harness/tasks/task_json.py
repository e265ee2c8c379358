"""The task.json file format: its private JSON shape (camelCase keys), reading and atomic
writing.

Only the task store uses this module. Parsing is strict on types (a string where a number
belongs is an error naming the field) and lenient where files written by earlier versions
must keep loading: optional keys may be missing or null, unknown keys are ignored, and an
integer is accepted where a float belongs.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, ValidationError
from pydantic.alias_generators import to_camel

from harness.atomic import write_atomic
from harness.errors import HarnessError
from harness.problems import TOP_LEVEL, Problem, problems
from harness.tasks.model import (
    AgentResult,
    Decision,
    DispatchRecord,
    Feedback,
    Progress,
    Task,
    ThreadRef,
)


class _Json(BaseModel):
    # Field order below is the key order in the file: keep it, or every task diffs in git.
    model_config = ConfigDict(
        alias_generator=to_camel,
        validate_by_alias=True,
        validate_by_name=True,
        strict=True,
        extra="ignore",
        frozen=True,
    )


class _ThreadJson(_Json):
    channel: str
    thread_ts: str


class _ResultJson(_Json):
    summary: str
    changes: list[str] = []
    issues: list[str] = []
    questions: list[str] = []


class _ProgressJson(_Json):
    message: str
    percent: float | None = None
    at: str


class _FeedbackJson(_Json):
    user: str
    value: Literal["good", "bad"]
    at: str


class _DispatchJson(_Json):
    agent_id: str
    role: str
    cwd: str | None = None
    model: str | None = None
    prompt: str | None = None
    parent_id: str | None = None
    started_at: str
    completed_at: str | None = None
    status: Literal["queued", "running", "completed", "failed", "killed", "interrupted"]
    journal_file: str | None = None
    cost_usd: float | None = None
    cost_simulated: bool = False
    turns: int | None = None
    duration_ms: int | None = None
    result: _ResultJson | None = None
    error: str | None = None
    last_text: str | None = None
    host_pid: int | None = None
    run_id: str | None = None
    progress: _ProgressJson | None = None
    branch: str | None = None
    head_commit: str | None = None
    diff_stat: str | None = None
    diff_file: str | None = None
    undelivered: str | None = None
    feedback: list[_FeedbackJson] | None = None
    requested_by: str | None = None


class _DecisionJson(_Json):
    title: str
    body: str
    at: str
    agent_id: str | None = None
    role: str | None = None


class _TaskJson(_Json):
    # The folder name is the task's identity; this copy is informational only.
    slug: str | None = None
    created: str
    description: str | None = None
    thread: _ThreadJson | None = None
    repository: str | None = None
    requester: str | None = None
    allowed: list[str] | None = None
    dispatches: list[_DispatchJson] | None = None
    decisions: list[_DecisionJson] | None = None


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
    field's path (e.g. ``dispatches[0].status``), what was found there, and the fix."""
    try:
        parsed = _TaskJson.model_validate_json(data)
    except ValidationError as exc:
        raise corrupt_task_file(file, exc) from exc
    return Task(
        slug=slug,
        created=parsed.created,
        description=parsed.description or "",
        thread=ThreadRef(parsed.thread.channel, parsed.thread.thread_ts) if parsed.thread else None,
        repository=parsed.repository,
        requester=parsed.requester,
        allowed=tuple(parsed.allowed or ()),
        dispatches=tuple(_dispatch(item) for item in parsed.dispatches or ()),
        decisions=tuple(
            Decision(
                title=item.title,
                body=item.body,
                at=item.at,
                agent_id=item.agent_id,
                role=item.role,
            )
            for item in parsed.decisions or ()
        ),
    )


def _dispatch(item: _DispatchJson) -> DispatchRecord:
    result = item.result
    progress = item.progress
    return DispatchRecord(
        agent_id=item.agent_id,
        role=item.role,
        cwd=item.cwd or "",
        model=item.model,
        prompt=item.prompt or "",
        parent_id=item.parent_id,
        started_at=item.started_at,
        completed_at=item.completed_at,
        status=item.status,
        journal_file=item.journal_file or "",
        cost_usd=item.cost_usd,
        cost_simulated=item.cost_simulated,
        turns=item.turns,
        duration_ms=item.duration_ms,
        result=AgentResult(
            summary=result.summary,
            changes=tuple(result.changes),
            issues=tuple(result.issues),
            questions=tuple(result.questions),
        )
        if result
        else None,
        error=item.error,
        last_text=item.last_text,
        host_pid=item.host_pid,
        run_id=item.run_id,
        progress=Progress(message=progress.message, at=progress.at, percent=progress.percent)
        if progress
        else None,
        branch=item.branch,
        head_commit=item.head_commit,
        diff_stat=item.diff_stat,
        diff_file=item.diff_file,
        undelivered=item.undelivered,
        feedback=tuple(Feedback(f.user, f.value, f.at) for f in item.feedback or ()),
        requested_by=item.requested_by,
    )


def corrupt_task_file(file: Path, exc: ValidationError) -> HarnessError:
    """The error for a task.json that does not parse: the absolute file, each bad field's
    path with what is wrong and what was found, and the fix."""
    found = _problems(exc)
    shown = [f"{problem.path}: {problem.problem}" for problem in found[:3]]
    if len(found) > 3:
        shown.append(f"and {len(found) - 3} more")
    first = found[0]
    where = "" if first.path == TOP_LEVEL else f" at {first.path}"
    return HarnessError(
        f"{os.path.abspath(file)}: corrupt task file: {'; '.join(shown)}",
        fix=f"{first.fix}{where} by hand, or restore {file.name} from version control; the "
        "journals next to it hold every message of each run",
    )


def _problems(exc: ValidationError) -> list[Problem]:
    errors = exc.errors(include_url=False)
    if errors and errors[0]["type"] == "json_invalid":
        # Not JSON at all: there is no field to name, only where the parser stopped.
        where = errors[0].get("ctx", {}).get("error", errors[0]["msg"])
        return [Problem(TOP_LEVEL, f"not valid JSON ({where})", "repair the JSON")]
    return problems(exc, _TaskJson)


# ---------------------------------------------------------------- writing


def write_task_file(file: Path, task: Task) -> Fingerprint:
    """Atomically replace ``file``: readers and crashes see the old version or the new one,
    never a torn file. Returns the new version's fingerprint."""
    return fingerprint(write_atomic(file, dump_task(task)))


def dump_task(task: Task) -> bytes:
    """task.json's bytes: UTF-8, two-space indents, a final newline (stable, diff-friendly)."""
    thread = task.thread
    model = _TaskJson(
        slug=task.slug,
        created=task.created,
        description=task.description,
        thread=_ThreadJson(channel=thread.channel, thread_ts=thread.thread_ts) if thread else None,
        repository=task.repository,
        requester=task.requester,
        allowed=list(task.allowed),
        dispatches=[_dispatch_json(record) for record in task.dispatches],
        decisions=[
            _DecisionJson(
                title=decision.title,
                body=decision.body,
                at=decision.at,
                agent_id=decision.agent_id,
                role=decision.role,
            )
            for decision in task.decisions
        ],
    )
    data = model.model_dump(mode="json", by_alias=True)
    return (json.dumps(data, indent=2, ensure_ascii=False) + "\n").encode("utf-8")


def _dispatch_json(record: DispatchRecord) -> _DispatchJson:
    result = record.result
    progress = record.progress
    return _DispatchJson(
        agent_id=record.agent_id,
        role=record.role,
        cwd=record.cwd,
        model=record.model,
        prompt=record.prompt,
        parent_id=record.parent_id,
        started_at=record.started_at,
        completed_at=record.completed_at,
        status=record.status,
        journal_file=record.journal_file,
        cost_usd=record.cost_usd,
        cost_simulated=record.cost_simulated,
        turns=record.turns,
        duration_ms=record.duration_ms,
        result=_ResultJson(
            summary=result.summary,
            changes=list(result.changes),
            issues=list(result.issues),
            questions=list(result.questions),
        )
        if result
        else None,
        error=record.error,
        last_text=record.last_text,
        host_pid=record.host_pid,
        run_id=record.run_id,
        progress=_ProgressJson(message=progress.message, percent=progress.percent, at=progress.at)
        if progress
        else None,
        branch=record.branch,
        head_commit=record.head_commit,
        diff_stat=record.diff_stat,
        diff_file=record.diff_file,
        undelivered=record.undelivered,
        feedback=[_FeedbackJson(user=f.user, value=f.value, at=f.at) for f in record.feedback]
        or None,
        requested_by=record.requested_by,
    )
