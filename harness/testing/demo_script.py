"""The demo's model: a plausible analyst that drafts and awaits a developer, and workers
that report their assignment; used by ``make demo`` and by tests of whole flows."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from harness.testing.model_turns import ModelRequest, ToolCall, Turn

DRAFT_TOOL = "mcp__harness__draft_agent"
AWAIT_TOOL = "mcp__harness__await_agent"
_ASSIGNMENT = "## Your Assignment"
_HISTORY = "## Task History"
_ROLE_HINTS = (
    ("code reviewer", "reviewer"),
    ("software developer", "developer"),
    ("product analyst", "analyst"),
)


def _excerpt(text: str, limit: int = 60) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1].rstrip() + "…"


def _assignment(prompt: str) -> str:
    """The request itself: what follows ``## Your Assignment`` when a history precedes it."""
    head, sep, tail = prompt.partition(_ASSIGNMENT)
    return tail.strip() if sep else head.strip()


def _earlier_work(prompt: str) -> str | None:
    """The first ``Summary:`` line of the prompt's ``## Task History`` section."""
    _, sep, history = prompt.partition(_HISTORY)
    if not sep:
        return None
    history = history.partition(_ASSIGNMENT)[0]
    match = re.search(r"^Summary:\s*(.+)$", history, flags=re.MULTILINE)
    return _excerpt(match.group(1), 100) if match else None


def _role_ish(system_text: str) -> str:
    lowered = system_text.lower()
    for hint, role in _ROLE_HINTS:
        if hint in lowered:
            return role
    return "worker"


def _finish(
    request: ModelRequest,
    summary: str,
    changes: Sequence[str] = (),
    issues: Sequence[str] = (),
    questions: Sequence[str] = (),
) -> Turn:
    if request.is_structured:
        return Turn.finish(summary, changes, issues, questions)
    lines = [summary, *(f"- {item}" for item in (*changes, *issues, *questions))]
    return Turn.say("\n".join(lines))


def _strings(value: Any) -> list[str]:
    return [str(item) for item in value] if isinstance(value, list) else []


def _coordinator_turn(request: ModelRequest, excerpt: str) -> Turn:
    plan = f"Plan for {excerpt}"
    results = request.tool_results
    errors = [r for r in results if r.is_error]
    if errors:
        issues = [f"{r.tool_name or 'tool'} failed: {r.text}" for r in errors]
        return _finish(request, f"{plan}: stopped on a tool error", issues=issues)
    for result in results:
        data = result.json()
        if result.tool_name == AWAIT_TOOL and isinstance(data, dict):
            agent_id = str(result.tool_input.get("agentId", "?"))
            status = str(data.get("status", "unknown"))
            child_result = data.get("result")
            child: dict[str, Any] = child_result if isinstance(child_result, dict) else {}
            reported = str(child.get("summary") or f"no result (status {status})")
            changes = [f"Drafted developer {agent_id} for step 1", *_strings(child.get("changes"))]
            issues = _strings(child.get("issues"))
            if status != "completed":
                issues.append(f"developer {agent_id} ended with status {status}")
            return _finish(
                request,
                f"{plan}: drafted developer {agent_id}, which reported: {reported}",
                changes,
                issues,
                _strings(child.get("questions")),
            )
        if result.tool_name == DRAFT_TOOL:
            drafted = data.get("agentId") if isinstance(data, dict) else None
            if isinstance(drafted, str):
                return Turn(
                    text=f"Waiting for developer {drafted}.",
                    tool_calls=(ToolCall(AWAIT_TOOL, {"agentId": drafted}),),
                )
            return _finish(
                request,
                f"{plan}: drafting failed",
                issues=[f"draft_agent returned no agentId: {result.text}"],
            )
    text = f"{plan}:\n1. Implement it (developer).\n2. Report the outcome.\nDrafting step 1 now."
    prompt = f"Implement step 1 of the plan for: {excerpt}"
    return Turn(
        text=text, tool_calls=(ToolCall(DRAFT_TOOL, {"role": "developer", "prompt": prompt}),)
    )


def _worker_turn(request: ModelRequest, excerpt: str) -> Turn:
    summary = f"Done: {excerpt}"
    earlier = _earlier_work(request.first_user_text)
    if earlier:
        summary += f" (building on earlier work: {earlier})"
    role = _role_ish(request.system_text)
    issues = [r.text for r in request.tool_results if r.is_error]
    return _finish(
        request, summary, changes=[f"{role} change for: {_excerpt(excerpt, 40)}"], issues=issues
    )


def demo_script(request: ModelRequest) -> Turn:
    """A deterministic, stateless policy for ``make demo`` and smoke tests.

    A coordinator (offered ``draft_agent``) drafts a developer for step 1, awaits it and
    reports; any other agent finishes at once with a result quoting its request."""
    if request.is_side_request:
        return Turn.say("Scripted demo session")
    excerpt = _excerpt(_assignment(request.first_user_text)) or "the request"
    if DRAFT_TOOL in request.tool_names:
        return _coordinator_turn(request, excerpt)
    return _worker_turn(request, excerpt)
