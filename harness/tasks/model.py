"""Domain values of an agent's work: its structured result and the dispatch record."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

DispatchStatus = Literal["queued", "running", "completed", "failed", "killed", "interrupted"]
FeedbackValue = Literal["good", "bad"]
FINAL_STATUSES: frozenset[str] = frozenset({"completed", "failed", "killed", "interrupted"})
# A task's status in listings: a dispatch status, or "new" for a task no agent worked on yet.
TaskStatus = Literal["new", "queued", "running", "completed", "failed", "killed", "interrupted"]

# The JSON schema every agent's final answer must match (through the CLI's StructuredOutput).
RESULT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "summary": {"type": "string", "description": "What was done, in a few sentences."},
        "changes": {
            "type": "array",
            "items": {"type": "string"},
            "description": "Each change made (files, behaviour), one per item.",
        },
        "issues": {
            "type": "array",
            "items": {"type": "string"},
            "description": "Problems found or left open.",
        },
        "questions": {
            "type": "array",
            "items": {"type": "string"},
            "description": "Questions for the humans, if any.",
        },
        # Optional: the team decides whether each becomes a note of its memory (harness/memory).
        "proposedNotes": {
            "type": "array",
            "items": {"type": "string"},
            "description": "Optional: at most 3 short facts worth remembering for every later "
            "task in this channel (a convention, a command, where something is), one per item. "
            "People decide whether to keep each.",
        },
    },
    "required": ["summary", "changes", "issues", "questions"],
    "additionalProperties": False,
}


@dataclass(frozen=True)
class AgentResult:
    summary: str
    changes: tuple[str, ...] = ()
    issues: tuple[str, ...] = ()
    questions: tuple[str, ...] = ()
    # Notes the agent proposes for the team's memory: shown for a person to keep or discard.
    proposed_notes: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        from harness import serialise  # pydantic, which a listing does not need

        return serialise.to_json(self)

    @classmethod
    def from_json(cls, data: Any) -> AgentResult | None:
        """Lenient, for a model's structured output: None when there is no summary; a list
        reads as its items in words, anything else but the summary as missing."""
        if not isinstance(data, dict) or not isinstance(data.get("summary"), str):
            return None
        lists = {
            key: [str(item) for item in value]
            for key, value in data.items()
            if isinstance(value, list)
        }
        from harness import serialise

        return serialise.from_json(cls, {**lists, "summary": data["summary"]})


@dataclass(frozen=True)
class ThreadRef:
    """Where a task lives in Slack (kept interface-agnostic: just two strings)."""

    channel: str
    thread_ts: str


@dataclass(frozen=True, init=False)
class Progress:
    """The latest ``update_progress`` of an agent."""

    # The fields' order is task.json's key order; callers pass (message, at, percent).
    message: str
    percent: float | None = field(default=None, kw_only=True)
    at: str

    def __init__(self, message: str, at: str, percent: float | None = None) -> None:
        object.__setattr__(self, "message", message)
        object.__setattr__(self, "percent", percent)
        object.__setattr__(self, "at", at)


@dataclass(frozen=True)
class Decision:
    """A decision an agent logged on its task (``log_decision``), kept for later agents."""

    title: str
    body: str
    at: str
    agent_id: str | None = None
    role: str | None = None


@dataclass(frozen=True)
class Trigger:
    """What started a task other than a person's message: a routine's firing."""

    routine: str
    kind: str  # schedule, github, http or run (`harness routines run`)
    at: str  # when it fired (a schedule's slot)
    why: str  # in words: "schedule `0 2 * * 1-5` (Europe/Paris)", the GitHub event...
    link: str | None = None  # the GitHub event's page
    by: str | None = None  # who called it
    # The firing's key among its routine's firings: how a restart finds the task a firing
    # made before the process died.
    firing: str | None = None


@dataclass(frozen=True)
class Feedback:
    """A person's verdict on an agent's result (the feedback buttons under it)."""

    user: str
    value: FeedbackValue
    at: str


# The fields' order of DispatchRecord and Task is task.json's key order (harness/serialise.py),
# so a new field is one line here; a field with a default reads old files that lack it.
@dataclass(frozen=True, kw_only=True)
class DispatchRecord:
    agent_id: str
    role: str
    cwd: str = ""
    model: str | None = None
    prompt: str = ""
    parent_id: str | None = None
    started_at: str
    completed_at: str | None = None
    status: DispatchStatus
    journal_file: str = ""
    cost_usd: float | None = None
    # The cost came from a scripted model (a demo, `harness run --scripted`): nothing was paid.
    cost_simulated: bool = False
    turns: int | None = None
    duration_ms: int | None = None
    result: AgentResult | None = None
    # Why it failed / was killed, in words a user can act on.
    error: str | None = None
    # The agent's last text, kept when it produced no structured result.
    last_text: str | None = None
    # PID of the harness process that ran it (shown to people; the liveness check of records
    # that have no run_id, written by earlier versions).
    host_pid: int | None = None
    # The run of the harness process that ran it (``harness/tasks/run_lock.py``): while that process
    # lives it holds the run's lock, so a restart tells a crash from a live peer by the lock.
    run_id: str | None = None
    progress: Progress | None = None
    # Where the work is, when the agent worked in a git workspace: the task's branch, its head
    # commit when the agent ended, and a diff stat of all it changed (committed or not);
    # the full diff is kept in the task folder as ``diff_file`` when there was any change.
    branch: str | None = None
    head_commit: str | None = None
    diff_stat: str | None = None
    diff_file: str | None = None
    # Why the result could not be delivered to where it was asked for (e.g. a Slack thread
    # the bot lost access to); None when it was, or when nobody was owed it.
    undelivered: str | None = None
    # One verdict per person, the latest kept.
    feedback: tuple[Feedback, ...] = ()
    # The person whose message started this agent (a front end's user id, e.g. a Slack
    # user); None for an agent another agent drafted (see ``parent_id``) or an older record.
    requested_by: str | None = None
    # The most it may spend: its role's maxBudgetUsd within what the task's budget had left
    # when it was queued (reserved while it lives, so agents at once cannot exceed the budget).
    budget_usd: float | None = None
    # It was asked for a plan first: it ran read-only, and its result is the plan.
    plan: bool = False


# How a pull request's checks stand: none reported yet, some still running, all passed, any
# failed.
ChecksState = Literal["unknown", "pending", "passed", "failed"]


@dataclass(frozen=True, kw_only=True)
class PullRequest:
    """The pull request a task's branch is in, and how its checks stand."""

    repository: str  # on the forge, as owner/name
    number: int
    url: str
    branch: str
    base: str
    opened_by: str  # the forge account it was opened as (a person's, or the bot's)
    requested_by: str | None = None  # who asked for it (a front end's user id)
    head_commit: str | None = None  # the commit last pushed
    checks: ChecksState = "unknown"
    checks_url: str | None = None  # the failing (else any) check's page
    failing: tuple[str, ...] = ()  # the names of the checks that failed
    fix_tries: int = 0  # developers drafted to fix failed checks on this pull request


@dataclass(frozen=True)
class Task:
    # In task.json the folder name is the task's identity; the file's copy is informational.
    slug: str
    created: str
    description: str = ""
    thread: ThreadRef | None = None
    # Keyword-only: they stand between fields callers pass by position (thread, dispatches).
    # The repository (a name from config.yaml's workspaces) the task's agents work in.
    repository: str | None = field(default=None, kw_only=True)
    # The person who asked for the task (a front end's user id); None when unknown.
    requester: str | None = field(default=None, kw_only=True)
    # Permission rules a human granted with "Allow for this task" (Claude Code rule syntax).
    allowed: tuple[str, ...] = field(default=(), kw_only=True)
    # The pull request the task's branch was pushed to, once one was opened.
    pull_request: PullRequest | None = field(default=None, kw_only=True)
    # What started it when no person's message did (a routine); None for a person's request.
    trigger: Trigger | None = field(default=None, kw_only=True)
    # The admin who lifted the spend limits (config.yaml's ``limits:``) for this task.
    limits_raised_by: str | None = field(default=None, kw_only=True)
    dispatches: tuple[DispatchRecord, ...] = ()
    decisions: tuple[Decision, ...] = ()


@dataclass(frozen=True)
class TaskSummary:
    """A task in one line, for listings (``harness tasks``, ``list_tasks``, ``/harness tasks``)."""

    slug: str
    created: str
    description: str
    dispatch_count: int
    thread: ThreadRef | None = None
    # The most recent dispatch, if any.
    last_role: str | None = None
    last_status: DispatchStatus | None = None
    status: TaskStatus = "new"  # see ``task_status``
    cost_usd: float | None = None  # see ``task_cost``
    cost_simulated: bool = False  # some of that cost came from a scripted model
    requester: str | None = None  # who asked for the task
    pull_request: str | None = None  # the URL of its pull request, once one was opened

    @classmethod
    def of(cls, task: Task) -> TaskSummary:
        last = task.dispatches[-1] if task.dispatches else None
        return cls(
            slug=task.slug,
            created=task.created,
            description=task.description,
            dispatch_count=len(task.dispatches),
            thread=task.thread,
            last_role=last.role if last else None,
            last_status=last.status if last else None,
            status=task_status(task.dispatches),
            cost_usd=task_cost(task.dispatches),
            cost_simulated=any(
                d.cost_simulated and d.cost_usd is not None for d in task.dispatches
            ),
            requester=task.requester,
            pull_request=task.pull_request.url if task.pull_request else None,
        )


def task_status(dispatches: Sequence[DispatchRecord]) -> TaskStatus:
    """Running while any of its agents runs (queued while the only ones left wait for a
    slot); else how the latest request a person made ended (an agent another drafted is
    part of its drafter's work, which reports on it); "new" before any agent."""
    if not dispatches:
        return "new"
    statuses = {d.status for d in dispatches}
    if "running" in statuses:
        return "running"
    if "queued" in statuses:
        return "queued"
    asked = [d for d in dispatches if d.parent_id is None] or list(dispatches)
    return asked[-1].status


def task_cost(dispatches: Sequence[DispatchRecord]) -> float | None:
    """What the task's agents cost in USD, as far as known; None when no agent reported it."""
    costs = [d.cost_usd for d in dispatches if d.cost_usd is not None]
    return sum(costs) if costs else None
