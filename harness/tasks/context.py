"""Context reconstruction: a task's history as a markdown prompt section.

This is the hand-off between agents: no session resume, the next agent reads what the earlier
ones reported. Only results are included (journals are noise for now); dispatches without a
result (queued, running, crashed) are skipped.

The text is kept within a character budget without ever dropping anything silently: the oldest
results are shortened to their summary first (and the text says which ones), then, as a last
resort, the oldest summaries are cut with a marker saying how many characters went.

The team's notes for the task's channel and repository (``harness/memory``) come first, in
at most half the budget: the notes that do not fit are left out at the end of the list, where
a marker says how many.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Protocol

from harness.tasks.model import AgentResult, DispatchRecord, Task

logger = logging.getLogger(__name__)

QUESTIONS_HEADING = "**Open questions (please address):**"
MEMORY_HEADING = "## Team Memory"
_MEMORY_INTRO = (
    "Notes the team keeps for this channel and repository (people wrote or kept each one): "
    "follow them unless your assignment says otherwise."
)


class RememberedNote(Protocol):
    """A note of the team's memory, as the context shows it (``harness.memory.Note``)."""

    @property
    def text(self) -> str: ...

    @property
    def scope(self) -> str: ...


@dataclass(frozen=True)
class _Entry:
    record: DispatchRecord
    result: AgentResult


def _moment(record: DispatchRecord) -> float:
    try:
        moment = datetime.fromisoformat(record.started_at)
    except ValueError:
        return float("-inf")  # unparsable: first, but still shown
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.timestamp()


def _bullets(title: str, items: Sequence[str]) -> list[str]:
    return [title, *(f"- {item}" for item in items)] if items else []


def _heading(entry: _Entry) -> str:
    return f"**{entry.record.role}** ({entry.record.status}) · agent `{entry.record.agent_id}`"


def _summary(entry: _Entry, cut: int, slug: str) -> str:
    text = entry.result.summary
    if cut <= 0:
        return f"Summary: {text}"
    kept = text[: len(text) - cut].rstrip()
    marker = (
        f"[… {cut} characters cut to fit the context budget; full text in `harness show {slug}`]"
    )
    return f"Summary: {kept} {marker}" if kept else f"Summary: {marker}"


def _render_entry(entry: _Entry, *, short: bool, cut: int, slug: str) -> str:
    lines = [_heading(entry), _summary(entry, cut, slug)]
    if not short:
        result = entry.result
        lines += _bullets("Changes:", result.changes)
        lines += _bullets("Issues:", result.issues)
        if entry.record.error:
            lines.append(f"Error: {entry.record.error}")
        # Questions go last and stand out: the next agent may be the one to answer them.
        lines += _bullets(QUESTIONS_HEADING, result.questions)
    return "\n".join(lines)


def _decisions(task: Task) -> str:
    lines = ["### Decisions"]
    for d in task.decisions:
        who = f" ({d.role} agent `{d.agent_id}`)" if d.role and d.agent_id else ""
        lines.append(f"- **{d.title}**{who}: {d.body}")
    return "\n".join(lines)


def _render(task: Task, entries: Sequence[_Entry], shortened: int, cuts: Sequence[int]) -> str:
    parts = ["## Task History", "### Original Request\n" + task.description.strip()]
    branch = task_branch(task)
    if branch is not None:
        parts.append(f"### Workspace\nThe task's work is on git branch `{branch}`.")
    if task.decisions:
        # Decisions are short and binding: they are never shortened.
        parts.append(_decisions(task))
    if entries:
        parts.append("### Previous Work")
        if shortened:
            names = ", ".join(
                f"{e.record.role} (agent `{e.record.agent_id}`)" for e in entries[:shortened]
            )
            parts.append(
                f"_Shortened to fit the context budget: the results of {names} show their "
                f"summary only. The full results are in `harness show {task.slug}`._"
            )
        parts += [
            _render_entry(entry, short=index < shortened, cut=cuts[index], slug=task.slug)
            for index, entry in enumerate(entries)
        ]
    return "\n\n".join(parts)


def build_task_context(task: Task, *, budget_chars: int) -> str:
    """The ``## Task History`` section for an agent joining ``task``, within ``budget_chars``
    where possible (the original request itself is never cut)."""
    results = [d for d in task.dispatches if d.result is not None]
    ordered = sorted(results, key=_moment)  # stable: equal times keep recording order
    entries = [_Entry(d, d.result) for d in ordered if d.result is not None]
    cuts = [0] * len(entries)

    text = _render(task, entries, 0, cuts)
    # Step 1: oldest first, one at a time, results shrink to their summary.
    shortened = 0
    while len(text) > budget_chars and shortened < len(entries):
        shortened += 1
        text = _render(task, entries, shortened, cuts)
    # Step 2: oldest first, summaries lose just enough text (the marker counts too).
    for index, entry in enumerate(entries):
        length = len(entry.result.summary)
        while len(text) > budget_chars and cuts[index] < length:
            cuts[index] = min(length, cuts[index] + len(text) - budget_chars)
            text = _render(task, entries, shortened, cuts)
    if len(text) > budget_chars:
        logger.warning(
            "context of task %s is %d chars, over the %d budget even with every summary cut",
            task.slug,
            len(text),
            budget_chars,
        )
    return text


def task_branch(task: Task) -> str | None:
    """The git branch the task's agents work on, as the latest dispatch that knows it says."""
    return next((d.branch for d in reversed(task.dispatches) if d.branch), None)


def _note_line(note: RememberedNote) -> str:
    kind, _, name = note.scope.partition(":")
    where = f"repository `{name}`" if kind == "repository" else "this channel"
    return f"- ({where}) {note.text}"


def _memory_text(lines: Sequence[str], cut: int, cut_chars: int) -> str:
    parts = [MEMORY_HEADING, _MEMORY_INTRO, *lines]
    if cut:
        parts.append(
            f"[… {cut} more note(s), {cut_chars} characters, cut here to fit the context budget]"
        )
    return "\n".join(parts)


def memory_section(notes: Sequence[RememberedNote], *, budget_chars: int) -> str:
    """The ``## Team Memory`` section: the notes in order, as many as fit ``budget_chars``,
    then a marker saying how many were cut there ("" when there are no notes)."""
    if not notes:
        return ""
    lines = [_note_line(note) for note in notes]
    for kept in range(len(lines), 0, -1):
        dropped = notes[kept:]
        text = _memory_text(lines[:kept], len(dropped), sum(len(n.text) for n in dropped))
        if len(text) <= budget_chars:
            return text
    return _memory_text([], len(notes), sum(len(note.text) for note in notes))


def compose_prompt(
    task: Task, prompt: str, *, budget_chars: int, notes: Sequence[RememberedNote] = ()
) -> str:
    """The team's notes (``notes``: the task's channel's and repository's, within half the
    budget) and the task's reconstructed history (in what is left) first, then what this
    agent is asked to do."""
    memory = memory_section(notes, budget_chars=budget_chars // 2)
    head = [memory] if memory else []
    has_history = any(d.result is not None for d in task.dispatches)
    if not has_history and task.description.strip() == prompt.strip():
        return "\n\n".join([*head, f"## Your Assignment\n\n{prompt}"]) if head else prompt
    context = build_task_context(task, budget_chars=budget_chars - len(memory))
    return "\n\n".join([*head, context, f"## Your Assignment\n\n{prompt}"])
