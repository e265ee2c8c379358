"""Plain-text rendering of tasks and results for the terminal. Pure functions."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from harness.tasks.common import DamagedTask, RepairReport
from harness.tasks.context import task_branch
from harness.tasks.model import AgentResult, DispatchRecord, PullRequest, Task, TaskSummary

if TYPE_CHECKING:  # types only: ``harness tasks`` renders without loading the workspaces
    from harness.workspaces.manager import PruneReport, WorkspaceInfo


def _bullets(title: str, items: Sequence[str], *, numbered: bool = False) -> list[str]:
    if not items:
        return []
    lines = [f"{title}:"]
    for n, item in enumerate(items, 1):
        lines.append(f"  {n}. {item}" if numbered else f"  - {item}")
    return lines


def render_result(result: AgentResult) -> str:
    lines = [f"Summary: {result.summary}"]
    lines += _bullets("Changes", result.changes)
    lines += _bullets("Issues", result.issues)
    lines += _bullets("Questions", result.questions, numbered=True)
    return "\n".join(lines)


def usage_parts(record: DispatchRecord) -> list[str]:
    """What a dispatch took, as far as it is known: duration, cost (marked simulated when the
    agent talked to a scripted model, whose prices mean nothing), turns."""
    parts = []
    if record.duration_ms is not None:
        parts.append(f"{record.duration_ms / 1000:.1f} s")
    if record.cost_usd is not None:
        parts.append(render_cost(record.cost_usd, simulated=record.cost_simulated))
    if record.turns is not None:
        parts.append(f"{record.turns} turn{'s' if record.turns != 1 else ''}")
    return parts


def describe_usage(record: DispatchRecord) -> str:
    return ", ".join([f"agent {record.agent_id}", *usage_parts(record)])


def render_record(record: DispatchRecord, *, task_slug: str | None = None) -> str:
    """One dispatch: who, how it ended, its result or why it has none."""
    header = f"{record.role} {record.status} ({describe_usage(record)})"
    if record.parent_id:
        header += f", drafted by {record.parent_id}"
    lines = [header]
    if task_slug:
        lines.append(f"Task: {task_slug}")
    if record.result is not None:
        lines.append(render_result(record.result))
    if record.branch:
        head = f" at {record.head_commit[:12]}" if record.head_commit else ""
        lines.append(f"Branch: {record.branch}{head}")
        if record.diff_stat:
            lines += [f"  {line.strip()}" for line in record.diff_stat.splitlines()]
    if record.error:
        lines.append(f"Reason: {record.error}")
    if record.undelivered:
        lines.append(f"Not delivered to its thread: {record.undelivered}")
    if record.result is None and record.last_text:
        lines.append(f"Last text from the agent:\n{record.last_text}")
    return "\n".join(lines)


def render_task_list(tasks: Sequence[TaskSummary], damaged: Sequence[DamagedTask] = ()) -> str:
    if not tasks and not damaged:
        return 'No tasks yet. Start one with: harness run "your request"'
    listing = _task_table(tasks) if tasks else "No readable tasks."
    return "\n\n".join([listing, render_damaged(damaged)]) if damaged else listing


def render_damaged(damaged: Sequence[DamagedTask]) -> str:
    """The tasks that could not be read, each with its problem and the command to run."""
    count = len(damaged)
    lines = [f"{count} task{'' if count == 1 else 's'} could not be read:"]
    for task in damaged:
        lines += [
            f"  {task.slug}: {task.file}: {task.problem}",
            f"    to repair it, run: {task.repair}",
        ]
    lines.append(
        "A repair keeps the damaged file as task.json.damaged-<time> and writes a fresh "
        "task.json with everything that still reads; `harness show SLUG` shows the problem "
        "and how to fix it by hand."
    )
    return "\n".join(lines)


def render_repair(report: RepairReport) -> str:
    """What ``harness repair`` did: nothing, or what it set aside, kept and dropped."""
    if not report.repaired:
        return f"Task {report.slug} reads fine: nothing to repair."
    lines = [
        f"Repaired task {report.slug}.",
        f"The damaged file is kept as {report.moved_to}",
        "Kept: " + (", ".join(report.kept) or "nothing"),
    ]
    lines += _bullets("Dropped", report.dropped) or ["Dropped: nothing"]
    lines.append("The journals and other files in the task folder are untouched.")
    return "\n".join(lines)


def render_cost(cost_usd: float | None, *, simulated: bool = False) -> str:
    """A cost in USD as listings show it; an em dash when no agent reported one."""
    if cost_usd is None:
        return "—"
    return f"${cost_usd:.4f}" + (" (simulated)" if simulated else "")


def _pull_request_number(url: str | None) -> str:
    """A task's pull request in a listing: #N from its URL (…/pull/N), — for none."""
    if url is None:
        return "—"
    number = url.rstrip("/").rsplit("/", 1)[-1]
    return f"#{number}" if number.isdigit() else url


def _task_table(tasks: Sequence[TaskSummary]) -> str:
    rows = [("SLUG", "CREATED", "STATUS", "COST", "DISPATCHES", "PR", "DESCRIPTION")]
    for t in tasks:
        description = " ".join(t.description.split())
        if len(description) > 60:
            description = description[:59] + "…"
        created = t.created[:19].replace("T", " ")
        cost = render_cost(t.cost_usd, simulated=t.cost_simulated)
        pull = _pull_request_number(t.pull_request)
        rows.append((t.slug, created, t.status, cost, str(t.dispatch_count), pull, description))
    widths = [max(map(len, column)) for column in list(zip(*rows, strict=True))[:6]]
    aligned = "<<<>><"  # text left, numbers right
    # One format for every line: 10,000 tasks print in tens of milliseconds.
    line = "  ".join(f"{{:{aligned[i]}{widths[i]}}}" for i in range(6)) + "  {}"
    return "\n".join([line.format(*row) for row in rows])


def render_workspaces(workspaces: Sequence[WorkspaceInfo]) -> str:
    if not workspaces:
        return "No workspaces yet: a task gets one when its first agent starts."
    lines = []
    for w in workspaces:
        kind = f"{w.repository or '?'} on {w.branch or 'a detached head'}"
        if w.kind == "scratch":
            kind = "scratch folder"
        state = "uncommitted work" if w.uncommitted else "clean"
        idle = w.modified.strftime("%Y-%m-%d %H:%M")
        problem = f" ({w.problem})" if w.problem else ""
        lines.append(f"{w.slug}  {kind}  {state}  last change {idle} UTC  {w.path}{problem}")
    return "\n".join(lines)


def render_prune(report: PruneReport) -> str:
    if report.dry_run:  # every workspace and why: nothing changed
        lines = [
            f"Would remove {len(report.removed)} workspace(s), keep {len(report.kept)} "
            "(dry run: nothing was changed)."
        ]
        for removed in report.removed:
            saved = "; its uncommitted work would be saved to a patch" if removed.would_save else ""
            lines.append(f"  would remove {removed.slug}: idle{saved}")
        lines += [f"  would keep {k.slug}: {k.reason} ({k.detail})" for k in report.kept]
        return "\n".join(lines)
    lines = [f"Removed {len(report.removed)} workspace(s), kept {len(report.kept)}."]
    for removed in report.removed:
        saved = f"; uncommitted work saved to {removed.patch}" if removed.patch else ""
        lines.append(f"  removed {removed.slug}{saved}")
    for kept in report.kept:
        if kept.reason != "recent":
            lines.append(f"  kept {kept.slug}: {kept.reason} ({kept.detail})")
    return "\n".join(lines)


def render_audit(entries: Sequence[Mapping[str, Any]]) -> str:
    """The audit log, one tool call a line: time, caller, tool, outcome, duration, input."""
    if not entries:
        return "No harness tool calls recorded for this task."
    lines = []
    for e in entries:
        caller = f"{e.get('callerRole') or '?'} {e.get('callerAgentId') or '?'}"
        lines.append(
            f"{e.get('time', '?')}  {caller}  {e.get('tool')}  {e.get('outcome')}  "
            f"{e.get('durationMs', '?')} ms  {json.dumps(e.get('input', {}), ensure_ascii=False)}"
        )
    return "\n".join(lines)


def render_tool_counts(entries: Sequence[Mapping[str, Any]]) -> str:
    """Calls per tool, with how many were refused or failed."""
    calls = Counter(str(e.get("tool")) for e in entries)
    failed = Counter(str(e.get("tool")) for e in entries if e.get("outcome") != "ok")
    return ", ".join(
        f"{tool} {n}" + (f" ({failed[tool]} refused/failed)" if failed[tool] else "")
        for tool, n in sorted(calls.items())
    )


def render_task(task: Task, context: str, audit: Sequence[Mapping[str, Any]] = ()) -> str:
    lines = [
        f"Task {task.slug}",
        f"Created: {task.created}",
    ]
    if task.thread is not None:
        lines.append(f"Slack thread: {task.thread.channel} / {task.thread.thread_ts}")
    if (trigger := task.trigger) is not None:  # a routine started it, not a person's message
        extra = "".join(
            f", {part}" for part in (trigger.link, trigger.by and f"by {trigger.by}") if part
        )
        lines.append(f"Trigger: routine {trigger.routine}, {trigger.why}, at {trigger.at}{extra}")
    if task.dispatches:
        last = task.dispatches[-1]
        branch = task_branch(task)
        where = f" on branch {branch}" if branch else ""
        repository = f" (repository {task.repository})" if task.repository else ""
        lines.append(f"Workspace: {last.cwd}{where}{repository}")
    if task.pull_request is not None:
        lines.append(f"Pull request: {describe_pull_request(task.pull_request)}")
    if audit:
        lines.append(f"Harness tool calls: {render_tool_counts(audit)}")
    lines += ["", "Reconstructed context (what the next agent sees):", "", context, ""]
    lines.append(f"Dispatches ({len(task.dispatches)}):")
    for d in task.dispatches:
        lines += ["", f"[{d.started_at}] " + render_record(d), f"Journal: {d.journal_file}"]
        if d.diff_file:
            lines.append(f"Diff: {d.diff_file}")
    return "\n".join(lines)


def describe_pull_request(pull: PullRequest) -> str:
    """A task's pull request in one line: where, from which branch, as whom, its checks."""
    failing = f" ({', '.join(pull.failing)})" if pull.failing else ""
    return (
        f"#{pull.number} {pull.url} ({pull.branch} into {pull.base}, opened as "
        f"{pull.opened_by}, checks {pull.checks}{failing})"
    )


def render_pull_request(pull: PullRequest) -> str:
    """``harness pr``: the pull request the task's branch was pushed to, and as whom."""
    head = f" at {pull.head_commit[:12]}" if pull.head_commit else ""
    asked = f" for {pull.requested_by}" if pull.requested_by else ""
    return "\n".join(
        [
            f"Pull request #{pull.number}: {pull.url}",
            f"Branch: {pull.branch}{head}, into {pull.base} of {pull.repository}",
            f"Opened as: {pull.opened_by}{asked}",
        ]
    )


# --json: one JSON document on standard output, for scripts (nothing else is printed there).
def to_json(value: Any) -> Any:
    """``value`` in its task.json form (``harness.serialise``): imported for the JSON
    outputs alone, since it loads pydantic, which the text listing does not need."""
    from harness import serialise

    return serialise.to_json(value)


# Tasks, summaries and workspaces in their task.json form (harness.serialise), camelCase keys.


def _json(document: Mapping[str, Any]) -> str:
    return json.dumps(document, indent=2, ensure_ascii=False)


def render_task_list_json(tasks: Sequence[TaskSummary], damaged: Sequence[DamagedTask] = ()) -> str:
    """``harness tasks --json``: the tasks newest first, and those that cannot be read."""
    return _json(
        {
            "tasks": [to_json(task) for task in tasks],
            "damaged": [{**to_json(task), "repair": task.repair} for task in damaged],
        }
    )


def render_task_json(task: Task, context: str, audit: Sequence[Mapping[str, Any]] = ()) -> str:
    """``harness show SLUG --json``: the task as task.json has it, its reconstructed context
    and its audit log."""
    return _json({"task": to_json(task), "context": context, "audit": list(audit)})


def render_audit_json(slug: str, entries: Sequence[Mapping[str, Any]]) -> str:
    """``harness audit SLUG --json``: the task's audit log entries, as stored."""
    return _json({"task": slug, "entries": list(entries)})


def render_workspaces_json(workspaces: Sequence[WorkspaceInfo]) -> str:
    """``harness workspaces list --json``."""
    return _json({"workspaces": [to_json(info) for info in workspaces]})


def render_pull_request_json(slug: str, pull: PullRequest) -> str:
    """``harness pr SLUG --json``: the task's pull request as task.json keeps it."""
    return _json({"task": slug, "pullRequest": to_json(pull)})
