"""The harness tools about agents: draft_agent, await_agent, kill_agent, list_agents,
show_agent (see ``registry`` for how a tool is declared; ``task_handlers`` has the others).
Handlers get checked input and their caller, and use the core's services only."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

from pydantic import Field

from harness.agents.metadata import FieldValue
from harness.agents.pool import AgentInfo
from harness.agents.services import Services
from harness.errors import LimitCode, LimitError, ToolError
from harness.tasks.model import FINAL_STATUSES, DispatchRecord
from harness.tools.registry import (
    AgentId,
    Caller,
    EmptyInput,
    Seconds,
    TaskSlug,
    check_agent,
    check_task,
    tool,
)
from harness.tools.validation import Text, ToolInput

KILL_WAIT_SECONDS = 15.0

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
    "SPEND_LIMIT_EXCEEDED": "finish with what you have and report it: a spend limit in "
    "config.yaml's limits is reached",
}


@tool(
    "draft_agent",
    """Start another agent (a role from roles/) on a task. Returns at once with its agentId
    while it works; call await_agent to get its result. Without taskSlug it joins your task
    and sees the task's history before your prompt. Write a self-contained prompt.""",
    DraftAgentInput,
)
async def draft_agent(
    svc: Services, caller: Caller | None, args: DraftAgentInput
) -> dict[str, Any]:
    if args.role not in svc.lifecycle.role_names():
        raise ToolError(
            "INVALID_INPUT",
            f"unknown role {args.role!r}",
            f"use one of: {', '.join(svc.lifecycle.role_names())}",
        )
    slug = args.taskSlug or (caller.task_slug if caller else None)
    if slug is None:
        raise ToolError(
            "INVALID_INPUT",
            "no taskSlug given and the caller has no task",
            "pass taskSlug (see list_tasks)",
        )
    check_task(caller, slug)
    try:
        handle = await svc.lifecycle.draft(
            args.role, args.prompt, task_slug=slug, parent_id=caller.agent_id if caller else None
        )
    except LimitError as exc:
        raise ToolError(exc.code, exc.message, _LIMIT_SUGGESTIONS[exc.code]) from exc
    live = svc.lifecycle.agent(handle.agent_id)
    return {
        "agentId": handle.agent_id,
        "role": handle.role,
        "taskSlug": handle.task_slug,
        "status": live.status if live else (await svc.lifecycle.record(handle.agent_id)).status,
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
    svc: Services, caller: Caller | None, args: AwaitAgentInput
) -> dict[str, Any]:
    if caller is not None and args.agentId == caller.agent_id:
        raise ToolError(
            "INVALID_AGENT_STATE", "an agent cannot await itself", "await an agent you drafted"
        )
    await check_agent(svc, caller, args.agentId)
    waiter = caller.agent_id if caller else None
    try:
        async with svc.lifecycle.waiting(waiter, f"waiting for agent {args.agentId}"):
            record = await svc.lifecycle.wait(args.agentId, args.timeoutSeconds)
    except TimeoutError:
        current = await svc.lifecycle.record(args.agentId)
        return {"agentId": args.agentId, "status": current.status, "timedOut": True}
    return record_json(record)


class AgentIdInput(ToolInput):
    agentId: AgentId  # noqa: N815


@tool("kill_agent", "Stop a queued or running agent. Its dispatch ends as killed.", AgentIdInput)
async def kill_agent(svc: Services, caller: Caller | None, args: AgentIdInput) -> dict[str, Any]:
    agent_id = args.agentId
    if caller is not None and agent_id == caller.agent_id:
        raise ToolError(
            "INVALID_AGENT_STATE",
            "an agent cannot kill itself",
            "finish with your structured result instead",
        )
    await check_agent(svc, caller, agent_id)
    who = f"agent {caller.agent_id} ({caller.role})" if caller else "an agent"
    if not await svc.lifecycle.kill(agent_id, f"killed by {who} via kill_agent"):
        record = await svc.lifecycle.record(agent_id)  # AgentNotFoundError when it never existed
        raise ToolError(
            "INVALID_AGENT_STATE",
            f"agent {agent_id} already ended ({record.status})",
            "nothing to kill; await_agent gives its result",
        )
    try:
        record = await svc.lifecycle.wait(agent_id, KILL_WAIT_SECONDS)
    except TimeoutError:
        return {"success": False, "message": f"agent {agent_id} is still stopping"}
    return {"success": True, "message": f"agent {agent_id} stopped ({record.status})"}


@tool(
    "list_agents",
    """List the queued and running agents: id, role, taskSlug, startedAt, status, parentId,
    activity and their list metadata.""",
    EmptyInput,
)
async def list_agents(svc: Services, caller: Caller | None, args: EmptyInput) -> dict[str, Any]:
    agents = [a for a in svc.lifecycle.agents() if caller is None or caller.sees(a.task_slug)]
    values = await svc.metadata.collect_many(Path(a.cwd) for a in agents)
    in_list = {f.name for f in svc.metadata.fields if f.include_in_list}
    listed = []
    for a in agents:
        meta = values.get(Path(a.cwd), {})
        listed.append(
            {
                **info_json(a),
                "metadata_count": len(meta),
                "metadata": {k: v.value for k, v in meta.items() if k in in_list},
            }
        )
    return {"agents": listed, "total_count": len(listed)}


@tool("show_agent", "Show one agent (live or finished) with all its metadata fields.", AgentIdInput)
async def show_agent(svc: Services, caller: Caller | None, args: AgentIdInput) -> dict[str, Any]:
    await check_agent(svc, caller, args.agentId)
    live = svc.lifecycle.agent(args.agentId)
    if live is not None:
        agent, cwd = info_json(live), Path(live.cwd)
    else:
        record = await svc.lifecycle.record(args.agentId)
        agent, cwd = record_json(record), Path(record.cwd)
    meta = (await svc.metadata.collect_many([cwd])).get(cwd, {}) if cwd.is_dir() else {}
    agent["metadata_count"] = len(meta)
    agent["metadata"] = {name: _field_json(svc, name, v) for name, v in meta.items()}
    return {"agent": agent}


# ---------------------------------------------------------------- shapes


def _field_json(svc: Services, name: str, value: FieldValue) -> dict[str, Any]:
    field = next(f for f in svc.metadata.fields if f.name == name)
    return {
        "value": value.value,
        "error": value.error,
        "schema": {"description": field.description, "include_in_list": field.include_in_list},
    }


def info_json(a: AgentInfo) -> dict[str, Any]:
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


def record_json(r: DispatchRecord) -> dict[str, Any]:
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
