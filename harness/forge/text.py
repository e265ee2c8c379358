"""A pull request's title and body, made from its task (pure).

The body says what the task's agents reported: the summary of the latest result, every
change, what they said about testing, what is left open, who asked and where the thread is.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from harness.tasks.model import DispatchRecord, Task

TITLE_CHARS = 72
BODY_CHARS = 60_000  # GitHub's limit is 65,536
_TESTING = re.compile(r"\b(test|tests|tested|testing|pytest|lint|ruff|mypy|ci|checks?)\b", re.I)
MARKER = "<!-- harness -->"


def pull_request_title(task: Task) -> str:
    """The task's request in one line, cut at a word near 72 characters."""
    line = " ".join(task.description.split()) or task.slug
    line = re.sub(r"^(plan|analyze|spec|design|feature)\s*:\s*", "", line, flags=re.I)
    line = line[:1].upper() + line[1:]
    if len(line) <= TITLE_CHARS:
        return line
    cut = line[: TITLE_CHARS - 1].rsplit(" ", 1)[0]
    return cut + "…"


def _results(task: Task) -> list[DispatchRecord]:
    return [d for d in task.dispatches if d.result is not None and d.status == "completed"]


def _bullets(items: Sequence[str]) -> list[str]:
    return [f"- {' '.join(item.split())}" for item in items]


def pull_request_body(
    task: Task, *, thread_url: str | None, asked_by: str | None, opened_for: str | None = None
) -> str:
    """The body: summary, changes, testing, open issues, then who asked and the thread.
    ``opened_for``: the person it is opened for when the bot opens it in their stead."""
    results = _results(task)
    latest = results[-1].result if results else None
    changes = [c for d in results if d.result for c in d.result.changes]
    issues = latest.issues if latest else ()
    said = [*(d.result.summary for d in results if d.result), *changes]
    testing = [line for line in said if _TESTING.search(line)]
    parts = ["## Summary", latest.summary if latest else task.description]
    if changes:
        parts += ["", "## Changes", *_bullets(list(dict.fromkeys(changes)))]
    parts += ["", "## How it was tested"]
    parts += _bullets(list(dict.fromkeys(testing))) if testing else ["Not said by the agents."]
    if issues:
        parts += ["", "## Left open", *_bullets(issues)]
    footer = [f"Task `{task.slug}` in the harness."]
    if asked_by:
        footer.append(f"Asked by {asked_by}.")
    if opened_for:
        footer.append(f"Opened by the bot for {opened_for}, whose GitHub account is not linked.")
    if thread_url:
        footer.append(f"[The Slack thread]({thread_url}).")
    parts += ["", "---", " ".join(footer), MARKER]
    body = "\n".join(parts)
    if len(body) > BODY_CHARS:
        body = body[: BODY_CHARS - 40] + "\n\n… (cut to fit)\n" + MARKER
    return body
