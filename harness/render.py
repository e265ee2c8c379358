"""Plain-text rendering of tasks and results for the terminal. Pure functions."""

from __future__ import annotations

from collections.abc import Sequence

from harness.results import AgentResult, DispatchRecord, Task


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


def describe_usage(record: DispatchRecord) -> str:
    parts = [f"agent {record.agent_id}"]
    if record.duration_ms is not None:
        parts.append(f"{record.duration_ms / 1000:.1f} s")
    if record.cost_usd is not None:
        parts.append(f"${record.cost_usd:.4f}")
    if record.turns is not None:
        parts.append(f"{record.turns} turn{'s' if record.turns != 1 else ''}")
    return ", ".join(parts)


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
    if record.error:
        lines.append(f"Reason: {record.error}")
    if record.result is None and record.last_text:
        lines.append(f"Last text from the agent:\n{record.last_text}")
    return "\n".join(lines)


def render_task_list(tasks: Sequence[Task]) -> str:
    if not tasks:
        return 'No tasks yet. Start one with: harness run "your request"'
    rows = [("SLUG", "CREATED", "DISPATCHES", "DESCRIPTION")]
    for t in tasks:
        description = " ".join(t.description.split())
        if len(description) > 60:
            description = description[:59] + "…"
        rows.append((t.slug, t.created[:19].replace("T", " "), str(len(t.dispatches)), description))
    widths = [max(len(r[i]) for r in rows) for i in range(3)]
    return "\n".join(
        f"{r[0]:<{widths[0]}}  {r[1]:<{widths[1]}}  {r[2]:>{widths[2]}}  {r[3]}" for r in rows
    )


def render_task(task: Task, context: str) -> str:
    lines = [
        f"Task {task.slug}",
        f"Created: {task.created}",
    ]
    if task.thread is not None:
        lines.append(f"Slack thread: {task.thread.channel} / {task.thread.thread_ts}")
    lines += ["", "Reconstructed context (what the next agent sees):", "", context, ""]
    lines.append(f"Dispatches ({len(task.dispatches)}):")
    for d in task.dispatches:
        lines += ["", f"[{d.started_at}] " + render_record(d), f"Journal: {d.journal_file}"]
    return "\n".join(lines)
