"""The harness tools. Each is declared next to its handler: name, description and an input
model whose fields (with their descriptions and limits) make the JSON schema the model sees.
Handlers get checked input and their caller, and use the orchestrator's facade only."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, TypeVar

from pydantic import Field

from harness.agents.metadata import FieldValue
from harness.agents.orchestrator import Orchestrator
from harness.agents.pool import AgentInfo
from harness.agents.questions import NoHumanError
from harness.errors import LimitCode, LimitError, ToolError
from harness.runtime.spec import ToolDeclaration
from harness.tasks.model import FINAL_STATUSES, DispatchRecord
from harness.tools.validation import Text, ToolInput, input_schema

KILL_WAIT_SECONDS = 15.0

# Patterns refuse blank text themselves, and keep their place in the schema the model sees.
AgentId = Annotated[
    str,
    Field(
        min_length=1,
        max_length=32,
        pattern=r"^a[0-9a-f]{6,16}$",
        description="the agent's id, from draft_agent or list_agents",
        examples=["a1b2c3d4e5"],
    ),
]
TaskSlug = Annotated[
    str,
    Field(
        min_length=1,
        max_length=64,
        pattern=r"^[a-z0-9](?:[a-z0-9-]{0,62}[a-z0-9])?$",
        description="a task slug from list_tasks",
        examples=["add-a-settings-page"],
    ),
]
Seconds = Annotated[float, Field(ge=1, le=86_400)]


@dataclass(frozen=True)
class Caller:
    """The agent making a tool call."""

    agent_id: str
    role: str
    category: str
    task_slug: str
    depth: int


Handler = Callable[[Orchestrator, Caller | None, Any], Awaitable[dict[str, Any]]]


@dataclass(frozen=True)
class Tool:
    name: str
    description: str
    input: type[ToolInput]
    handler: Handler

    def declaration(self) -> ToolDeclaration:
        return ToolDeclaration(self.name, self.description, input_schema(self.input))


TOOLS: dict[str, Tool] = {}
H = TypeVar("H", bound=Handler)


def tool(name: str, description: str, input_model: type[ToolInput]) -> Callable[[H], H]:
    def register(handler: H) -> H:
        TOOLS[name] = Tool(name, " ".join(description.split()), input_model, handler)
        return handler

    return register


# ---------------------------------------------------------------- agents


class DraftAgentInput(ToolInput):
    role: Annotated[
        Text, Field(max_length=64, description="the role to draft", examples=["developer"])
    ]
    prompt: Annotated[Text, Field(max_length=20_000, description="what the agent should do")]
    taskSlug: TaskSlug | None = None  # noqa: N815 (the field name the model sees)


# What an agent over a cap does (the error's own fix speaks to the people of the task).
_LIMIT_SUGGESTIONS: dict[LimitCode, str] = {
    "DEPTH_LIMIT_EXCEEDED": "do this part of the work yourself, or raise mcp.maxDepth in "
    "config.yaml",
    "BUDGET_EXCEEDED": "finish with what you have and report it, or raise mcp.taskBudgetUsd "
    "in config.yaml",
}


@tool(
    "draft_agent",
    """Start another agent (a role from roles/) on a task. Returns at once with its agentId
    while it works; call await_agent to get its result. Without taskSlug it joins your task
    and sees the task's history before your prompt. Write a self-contained prompt.""",
    DraftAgentInput,
)
async def draft_agent(
    orch: Orchestrator, caller: Caller | None, args: DraftAgentInput
) -> dict[str, Any]:
    if args.role not in orch.role_names():
        raise ToolError(
            "INVALID_INPUT",
            f"unknown role {args.role!r}",
            f"use one of: {', '.join(orch.role_names())}",
        )
    slug = args.taskSlug or (caller.task_slug if caller else None)
    if slug is None:
        raise ToolError(
            "INVALID_INPUT",
            "no taskSlug given and the caller has no task",
            "pass taskSlug (see list_tasks)",
        )
    try:
        handle = await orch.draft(
            args.role, args.prompt, task_slug=slug, parent_id=caller.agent_id if caller else None
        )
    except LimitError as exc:
        raise ToolError(exc.code, exc.message, _LIMIT_SUGGESTIONS[exc.code]) from exc
    live = orch.agent(handle.agent_id)
    return {
        "agentId": handle.agent_id,
        "role": handle.role,
        "taskSlug": handle.task_slug,
        "status": live.status if live else (await orch.record(handle.agent_id)).status,
    }


class AwaitAgentInput(ToolInput):
    agentId: AgentId  # noqa: N815
    timeoutSeconds: Seconds | None = Field(  # noqa: N815
        None, description="give up waiting after this many seconds"
    )


@tool(
    "await_agent",
    """Wait for an agent to finish and return its status and structured result (summary,
    changes, issues, questions), cost and duration. Several callers may await one agent; it
    also answers after the agent finished. With timeoutSeconds it returns {timedOut: true} if
    the agent is still working then.""",
    AwaitAgentInput,
)
async def await_agent(
    orch: Orchestrator, caller: Caller | None, args: AwaitAgentInput
) -> dict[str, Any]:
    if caller is not None and args.agentId == caller.agent_id:
        raise ToolError(
            "INVALID_AGENT_STATE", "an agent cannot await itself", "await an agent you drafted"
        )
    waiter = caller.agent_id if caller else None
    try:
        async with orch.waiting(waiter, f"waiting for agent {args.agentId}"):
            record = await orch.wait(args.agentId, args.timeoutSeconds)
    except TimeoutError:
        current = await orch.record(args.agentId)
        return {"agentId": args.agentId, "status": current.status, "timedOut": True}
    return _record_json(record)


class AgentIdInput(ToolInput):
    agentId: AgentId  # noqa: N815


@tool("kill_agent", "Stop a queued or running agent. Its dispatch ends as killed.", AgentIdInput)
async def kill_agent(
    orch: Orchestrator, caller: Caller | None, args: AgentIdInput
) -> dict[str, Any]:
    agent_id = args.agentId
    if caller is not None and agent_id == caller.agent_id:
        raise ToolError(
            "INVALID_AGENT_STATE",
            "an agent cannot kill itself",
            "finish with your structured result instead",
        )
    who = f"agent {caller.agent_id} ({caller.role})" if caller else "an agent"
    if not await orch.kill(agent_id, f"killed by {who} via kill_agent"):
        record = await orch.record(agent_id)  # AgentNotFoundError when it never existed
        raise ToolError(
            "INVALID_AGENT_STATE",
            f"agent {agent_id} already ended ({record.status})",
            "nothing to kill; await_agent gives its result",
        )
    try:
        record = await orch.wait(agent_id, KILL_WAIT_SECONDS)
    except TimeoutError:
        return {"success": False, "message": f"agent {agent_id} is still stopping"}
    return {"success": True, "message": f"agent {agent_id} stopped ({record.status})"}


class EmptyInput(ToolInput):
    pass


@tool(
    "list_agents",
    """List the queued and running agents: id, role, taskSlug, startedAt, status, parentId,
    activity and their list metadata.""",
    EmptyInput,
)
async def list_agents(
    orch: Orchestrator, caller: Caller | None, args: EmptyInput
) -> dict[str, Any]:
    agents = orch.agents()
    values = await orch.collect_metadata(Path(a.cwd) for a in agents)
    in_list = {f.name for f in orch.metadata_fields if f.include_in_list}
    listed = []
    for a in agents:
        meta = values.get(Path(a.cwd), {})
        listed.append(
            {
                **_info_json(a),
                "metadata_count": len(meta),
                "metadata": {k: v.value for k, v in meta.items() if k in in_list},
            }
        )
    return {"agents": listed, "total_count": len(listed)}


@tool("show_agent", "Show one agent (live or finished) with all its metadata fields.", AgentIdInput)
async def show_agent(
    orch: Orchestrator, caller: Caller | None, args: AgentIdInput
) -> dict[str, Any]:
    live = orch.agent(args.agentId)
    if live is not None:
        agent, cwd = _info_json(live), Path(live.cwd)
    else:
        record = await orch.record(args.agentId)
        agent, cwd = _record_json(record), Path(record.cwd)
    meta = (await orch.collect_metadata([cwd])).get(cwd, {}) if cwd.is_dir() else {}
    agent["metadata_count"] = len(meta)
    agent["metadata"] = {name: _field_json(orch, name, v) for name, v in meta.items()}
    return {"agent": agent}


# ---------------------------------------------------------------- tasks


@tool(
    "list_tasks",
    "List the tasks: slug, created, description, dispatchCount (newest first).",
    EmptyInput,
)
async def list_tasks(orch: Orchestrator, caller: Caller | None, args: EmptyInput) -> dict[str, Any]:
    tasks = await orch.task_summaries()
    return {
        "tasks": [
            {
                "slug": t.slug,
                "created": t.created,
                "description": t.description,
                "dispatchCount": t.dispatch_count,
            }
            for t in tasks
        ]
    }


class TaskSlugInput(ToolInput):
    taskSlug: TaskSlug  # noqa: N815


@tool(
    "get_task_context",
    "The reconstructed history of a task: its original request and every agent result.",
    TaskSlugInput,
)
async def get_task_context(
    orch: Orchestrator, caller: Caller | None, args: TaskSlugInput
) -> dict[str, Any]:
    return {"taskSlug": args.taskSlug, "context": await orch.task_context(args.taskSlug)}


# ---------------------------------------------------------------- the task's humans


class AskHumanInput(ToolInput):
    question: Annotated[Text, Field(max_length=2_000, description="the question, self-contained")]
    options: (
        Annotated[
            list[Annotated[Text, Field(max_length=75)]],
            Field(max_length=10, description="possible answers (at most 10)"),
        ]
        | None
    ) = None
    timeoutSeconds: Seconds | None = Field(  # noqa: N815
        None, description="how long to wait for an answer"
    )


@tool(
    "ask_human",
    """Ask the humans of this task a question (posted in its Slack thread, or on the
    terminal) and wait for the answer. Give options for a choice (shown as buttons). Returns
    {answer, answeredBy}, or {timedOut: true} when nobody answered in time.""",
    AskHumanInput,
)
async def ask_human(
    orch: Orchestrator, caller: Caller | None, args: AskHumanInput
) -> dict[str, Any]:
    caller = _require_agent(caller, "ask_human")
    try:
        question, answer = await orch.ask_human(
            caller.agent_id, args.question, tuple(args.options or ()), args.timeoutSeconds
        )
    except NoHumanError as exc:
        raise ToolError("NO_HUMAN_AVAILABLE", exc.message, exc.fix) from exc
    if answer is None:
        return {"timedOut": True, "questionId": question.question_id}
    return {"answer": answer.text, "answeredBy": answer.answered_by}


class UpdateProgressInput(ToolInput):
    message: Annotated[Text, Field(max_length=500, description="what you are doing now")]
    percent: Annotated[float, Field(ge=0, le=100, description="how much is done, 0-100")] | None = (
        None
    )


@tool(
    "update_progress",
    "Tell the humans how far you are: updates your status message in the thread.",
    UpdateProgressInput,
)
async def update_progress(
    orch: Orchestrator, caller: Caller | None, args: UpdateProgressInput
) -> dict[str, Any]:
    caller = _require_agent(caller, "update_progress")
    record = await orch.report_progress(caller.agent_id, args.message, args.percent)
    assert record.progress is not None
    return {"recorded": True, "at": record.progress.at}


class LogDecisionInput(ToolInput):
    title: Annotated[Text, Field(max_length=200, description="the decision in a few words")]
    body: Annotated[Text, Field(max_length=5_000, description="the reasoning and alternatives")]


@tool(
    "log_decision",
    """Record a decision on this task (why, not just what); later agents see it in the
    task's history.""",
    LogDecisionInput,
)
async def log_decision(
    orch: Orchestrator, caller: Caller | None, args: LogDecisionInput
) -> dict[str, Any]:
    caller = _require_agent(caller, "log_decision")
    task = await orch.log_decision(caller.agent_id, args.title, args.body)
    return {"logged": True, "decisionCount": len(task.decisions)}


# ---------------------------------------------------------------- shapes


def _require_agent(caller: Caller | None, tool_name: str) -> Caller:
    if caller is None:
        raise ToolError(
            "INVALID_AGENT_STATE",
            f"{tool_name} needs to know which agent is calling, and this call names none",
            "call it from an agent run by the harness",
        )
    return caller


def _field_json(orch: Orchestrator, name: str, value: FieldValue) -> dict[str, Any]:
    field = next(f for f in orch.metadata_fields if f.name == name)
    return {
        "value": value.value,
        "error": value.error,
        "schema": {"description": field.description, "include_in_list": field.include_in_list},
    }


def _info_json(a: AgentInfo) -> dict[str, Any]:
    return {
        "id": a.agent_id,
        "role": a.role,
        "taskSlug": a.task_slug,
        "startedAt": a.started_at or a.queued_at,
        "status": a.status,
        "parentId": a.parent_id,
        "depth": a.depth,
        "elapsedSeconds": a.elapsed_seconds,
        "activity": a.activity,
    }


def _record_json(r: DispatchRecord) -> dict[str, Any]:
    out: dict[str, Any] = {
        "agentId": r.agent_id,
        "role": r.role,
        "status": r.status,
        "startedAt": r.started_at,
        "completedAt": r.completed_at,
        "parentId": r.parent_id,
        "costUsd": r.cost_usd,
        "durationMs": r.duration_ms,
        "turns": r.turns,
    }
    if r.result is not None:
        out["result"] = r.result.to_json()
    if r.error:
        out["error"] = r.error
    if r.result is None and r.last_text and r.status in FINAL_STATUSES:
        out["lastText"] = r.last_text
    return out
