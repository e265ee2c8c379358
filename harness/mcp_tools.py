"""What each harness tool does, given checked input and its caller (see harness.mcp)."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.context import build_task_context
from harness.errors import ToolError
from harness.metadata import FieldValue, MetadataCollector
from harness.orchestrator import Orchestrator, utc_now
from harness.pool import AgentInfo
from harness.questions import NoHumanError, Question
from harness.results import FINAL_STATUSES, Decision, DispatchRecord
from harness.validation import Field

AGENT_ID = Field(
    "string",
    "the agent's id, from draft_agent or list_agents",
    max_length=32,
    pattern=r"a[0-9a-f]{6}",
    example="a1b2c3",
)
TASK_SLUG = Field(
    "string",
    "a task slug from list_tasks",
    max_length=64,
    pattern=r"[a-z0-9](?:[a-z0-9-]{0,62}[a-z0-9])?",
    example="add-a-settings-page",
)
KILL_WAIT_SECONDS = 15.0


@dataclass(frozen=True)
class Caller:
    """The agent making a tool call."""

    agent_id: str
    role: str
    category: str
    task_slug: str
    depth: int


Handler = Callable[["ToolHandlers", dict[str, Any], Caller | None], Awaitable[dict[str, Any]]]


@dataclass(frozen=True)
class ToolSpec:
    description: str
    fields: Mapping[str, Field]
    handler: Handler


class ToolHandlers:
    def __init__(self, orchestrator: Orchestrator, metadata: MetadataCollector) -> None:
        self.orch = orchestrator
        self.metadata = metadata

    async def draft_agent(self, args: dict[str, Any], caller: Caller | None) -> dict[str, Any]:
        orch, settings = self.orch, self.orch.config.mcp
        role = args["role"]
        if role not in orch.roles:
            raise ToolError(
                "INVALID_INPUT",
                f"unknown role {role!r}",
                f"use one of: {', '.join(sorted(orch.roles))}",
            )
        slug = args.get("taskSlug") or (caller.task_slug if caller else None)
        if slug is None:
            raise ToolError(
                "INVALID_INPUT",
                "no taskSlug given and the caller has no task",
                "pass taskSlug (see list_tasks)",
            )
        task = orch.store.get(slug)
        depth = (caller.depth if caller else 0) + 1
        if depth > settings.max_depth:
            raise ToolError(
                "DEPTH_LIMIT_EXCEEDED",
                f"agents may draft agents at most {settings.max_depth} levels deep; this "
                f"agent would be level {depth}",
                "do this part of the work yourself, or raise mcp.maxDepth in config.yaml",
            )
        budget = settings.task_budget_usd
        spent = sum(d.cost_usd or 0.0 for d in task.dispatches)
        if budget is not None and spent >= budget:
            raise ToolError(
                "BUDGET_EXCEEDED",
                f"task {slug} has spent ${spent:.4f} of its ${budget:.2f} budget",
                "finish with what you have and report it, or raise mcp.taskBudgetUsd in "
                "config.yaml",
            )
        handle = orch.draft(
            role, args["prompt"], task_slug=slug, parent_id=caller.agent_id if caller else None
        )
        live = orch.pool.get(handle.agent_id)
        return {
            "agentId": handle.agent_id,
            "role": handle.role,
            "taskSlug": handle.task_slug,
            "status": live.state if live else orch.record(handle.agent_id).status,
        }

    async def await_agent(self, args: dict[str, Any], caller: Caller | None) -> dict[str, Any]:
        agent_id = args["agentId"]
        if caller is not None and agent_id == caller.agent_id:
            raise ToolError(
                "INVALID_AGENT_STATE", "an agent cannot await itself", "await an agent you drafted"
            )
        waiter = self.orch.pool.get(caller.agent_id) if caller else None
        try:
            async with self.orch.pool.lend_slot(waiter):
                record = await self.orch.wait(agent_id, args.get("timeoutSeconds"))
        except TimeoutError:
            current = self.orch.record(agent_id)
            return {"agentId": agent_id, "status": current.status, "timedOut": True}
        return _record_json(record)

    async def kill_agent(self, args: dict[str, Any], caller: Caller | None) -> dict[str, Any]:
        agent_id = args["agentId"]
        if caller is not None and agent_id == caller.agent_id:
            raise ToolError(
                "INVALID_AGENT_STATE",
                "an agent cannot kill itself",
                "finish with your structured result instead",
            )
        who = f"agent {caller.agent_id} ({caller.role})" if caller else "an agent"
        if not await self.orch.kill(agent_id, f"killed by {who} via kill_agent"):
            record = self.orch.record(agent_id)  # AgentNotFoundError when it never existed
            raise ToolError(
                "INVALID_AGENT_STATE",
                f"agent {agent_id} already ended ({record.status})",
                "nothing to kill; await_agent gives its result",
            )
        try:
            record = await self.orch.wait(agent_id, KILL_WAIT_SECONDS)
        except TimeoutError:
            return {"success": False, "message": f"agent {agent_id} is still stopping"}
        return {"success": True, "message": f"agent {agent_id} stopped ({record.status})"}

    async def ask_human(self, args: dict[str, Any], caller: Caller | None) -> dict[str, Any]:
        caller = _require_agent(caller, "ask_human")
        orch = self.orch
        question = Question(
            question_id=orch.questions.new_id(),
            agent_id=caller.agent_id,
            role=caller.role,
            task_slug=caller.task_slug,
            text=args["question"],
            options=tuple(args.get("options") or ()),
            asked_at=utc_now(),
            timeout_seconds=float(args.get("timeoutSeconds") or orch.config.ask_timeout_seconds),
        )
        entry = orch.pool.get(caller.agent_id)
        if entry is not None:
            entry.control.activity = f"waiting for an answer: {question.text[:80]}"
        try:
            # Waiting on a human is like waiting on an agent: the slot serves the queue.
            async with orch.pool.lend_slot(entry):
                answer = await orch.questions.ask(question, orch.store.get(caller.task_slug))
        except NoHumanError as exc:
            raise ToolError("NO_HUMAN_AVAILABLE", exc.message, exc.fix) from exc
        finally:
            if entry is not None:
                entry.control.activity = "working"
        if answer is None:
            return {"timedOut": True, "questionId": question.question_id}
        return {"answer": answer.text, "answeredBy": answer.answered_by}

    async def update_progress(self, args: dict[str, Any], caller: Caller | None) -> dict[str, Any]:
        caller = _require_agent(caller, "update_progress")
        record = self.orch.report_progress(caller.agent_id, args["message"], args.get("percent"))
        assert record.progress is not None
        return {"recorded": True, "at": record.progress.at}

    async def log_decision(self, args: dict[str, Any], caller: Caller | None) -> dict[str, Any]:
        caller = _require_agent(caller, "log_decision")
        decision = Decision(
            title=args["title"],
            body=args["body"],
            at=utc_now(),
            agent_id=caller.agent_id,
            role=caller.role,
        )
        task = self.orch.store.add_decision(caller.task_slug, decision)
        return {"logged": True, "decisionCount": len(task.decisions)}

    async def list_agents(self, args: dict[str, Any], caller: Caller | None) -> dict[str, Any]:
        agents = self.orch.agents()
        values = await self.metadata.collect_many(Path(a.cwd) for a in agents)
        in_list = {f.name for f in self.metadata.fields if f.include_in_list}
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

    async def show_agent(self, args: dict[str, Any], caller: Caller | None) -> dict[str, Any]:
        agent_id = args["agentId"]
        live = self.orch.agent(agent_id)
        if live is not None:
            agent, cwd = _info_json(live), Path(live.cwd)
        else:
            record = self.orch.record(agent_id)
            agent, cwd = _record_json(record), Path(record.cwd)
        meta = await self.metadata.collect(cwd) if cwd.is_dir() else {}
        agent["metadata_count"] = len(meta)
        agent["metadata"] = {name: self._field_json(name, v) for name, v in meta.items()}
        return {"agent": agent}

    def _field_json(self, name: str, value: FieldValue) -> dict[str, Any]:
        field = next(f for f in self.metadata.fields if f.name == name)
        return {
            "value": value.value,
            "error": value.error,
            "schema": {"description": field.description, "include_in_list": field.include_in_list},
        }

    async def list_tasks(self, args: dict[str, Any], caller: Caller | None) -> dict[str, Any]:
        tasks = await asyncio.to_thread(self.orch.store.list)
        return {
            "tasks": [
                {
                    "slug": t.slug,
                    "created": t.created,
                    "description": t.description,
                    "dispatchCount": len(t.dispatches),
                }
                for t in tasks
            ]
        }

    async def get_task_context(self, args: dict[str, Any], caller: Caller | None) -> dict[str, Any]:
        task = self.orch.store.get(args["taskSlug"])
        budget = self.orch.config.context_budget_chars
        return {"taskSlug": task.slug, "context": build_task_context(task, budget_chars=budget)}


def _require_agent(caller: Caller | None, tool: str) -> Caller:
    if caller is None:
        raise ToolError(
            "INVALID_AGENT_STATE",
            f"{tool} needs to know which agent is calling, and this call names none",
            "call it from an agent run by the harness",
        )
    return caller


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


def _spec(description: str, fields: Mapping[str, Field], handler: Handler) -> ToolSpec:
    return ToolSpec(description, fields, handler)


TOOL_SPECS: dict[str, ToolSpec] = {
    "draft_agent": _spec(
        "Start another agent (a role from roles/) on a task. Returns at once with its agentId "
        "while it works; call await_agent to get its result. Without taskSlug it joins your "
        "task and sees the task's history before your prompt. Write a self-contained prompt.",
        {
            "role": Field("string", "the role to draft, e.g. developer", max_length=64),
            "prompt": Field("string", "what the agent should do", max_length=20_000),
            "taskSlug": dataclasses.replace(TASK_SLUG, required=False),
        },
        ToolHandlers.draft_agent,
    ),
    "await_agent": _spec(
        "Wait for an agent to finish and return its status and structured result (summary, "
        "changes, issues, questions), cost and duration. Several callers may await one agent; "
        "it also answers after the agent finished. With timeoutSeconds it returns "
        "{timedOut: true} if the agent is still working then.",
        {
            "agentId": AGENT_ID,
            "timeoutSeconds": Field(
                "number",
                "give up waiting after this many seconds",
                required=False,
                minimum=1,
                maximum=86_400,
            ),
        },
        ToolHandlers.await_agent,
    ),
    "kill_agent": _spec(
        "Stop a queued or running agent. Its dispatch ends as killed.",
        {"agentId": AGENT_ID},
        ToolHandlers.kill_agent,
    ),
    "ask_human": _spec(
        "Ask the humans of this task a question (posted in its Slack thread, or on the "
        "terminal) and wait for the answer. Give options for a choice (shown as buttons). "
        "Returns {answer, answeredBy}, or {timedOut: true} when nobody answered in time.",
        {
            "question": Field("string", "the question, self-contained", max_length=2_000),
            "options": Field(
                "strings",
                "possible answers (at most 10)",
                required=False,
                max_length=75,
                max_items=10,
            ),
            "timeoutSeconds": Field(
                "number",
                "how long to wait for an answer",
                required=False,
                minimum=1,
                maximum=86_400,
            ),
        },
        ToolHandlers.ask_human,
    ),
    "update_progress": _spec(
        "Tell the humans how far you are: updates your status message in the thread.",
        {
            "message": Field("string", "what you are doing now", max_length=500),
            "percent": Field(
                "number", "how much is done, 0-100", required=False, minimum=0, maximum=100
            ),
        },
        ToolHandlers.update_progress,
    ),
    "log_decision": _spec(
        "Record a decision on this task (why, not just what); later agents see it in the "
        "task's history.",
        {
            "title": Field("string", "the decision in a few words", max_length=200),
            "body": Field("string", "the reasoning and alternatives", max_length=5_000),
        },
        ToolHandlers.log_decision,
    ),
    "list_agents": _spec(
        "List the queued and running agents: id, role, taskSlug, startedAt, status, parentId, "
        "activity and their list metadata.",
        {},
        ToolHandlers.list_agents,
    ),
    "show_agent": _spec(
        "Show one agent (live or finished) with all its metadata fields.",
        {"agentId": AGENT_ID},
        ToolHandlers.show_agent,
    ),
    "list_tasks": _spec(
        "List the tasks: slug, created, description, dispatchCount (newest first).",
        {},
        ToolHandlers.list_tasks,
    ),
    "get_task_context": _spec(
        "The reconstructed history of a task: its original request and every agent result.",
        {"taskSlug": TASK_SLUG},
        ToolHandlers.get_task_context,
    ),
}
