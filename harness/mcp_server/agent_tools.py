"""The MCP server's tools about agents: start_task, draft_agent, await_agent, kill_agent,
list_agents. Inputs are checked like the agents' own harness tools (same field types and
error shape), and results have the same shapes as theirs."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Annotated, Any

from pydantic import Field

from harness.agents.dispatching import AgentHandle
from harness.errors import ToolError
from harness.mcp_server.access import Person
from harness.mcp_server.service import McpService, McpTool, Report
from harness.mcp_server.watch import question_line
from harness.tasks.model import FINAL_STATUSES, DispatchRecord, ThreadRef
from harness.tools.handlers import KILL_WAIT_SECONDS, info_json, record_json
from harness.tools.registry import AgentId, Seconds, TaskSlug
from harness.tools.validation import Text, ToolInput

# How often a client waiting on an agent hears that it still works, with nothing new.
HEARTBEAT_SECONDS = 5.0
# How often the record of an agent another harness process runs is read while awaiting it.
ELSEWHERE_POLL_SECONDS = 2.0

ChannelId = Annotated[
    str,
    Field(
        pattern=r"^[CGD][A-Z0-9]{2,30}$",
        description="a Slack channel id to post the request in; its thread becomes the task's",
        examples=["C012ABCDEF"],
    ),
]
ThreadTs = Annotated[
    str,
    Field(
        pattern=r"^[0-9]{1,12}\.[0-9]{1,8}$",
        description="a message ts in `channel`: post in its thread (the task of that thread)",
        examples=["1712345678.000100"],
    ),
]
RoleName = Annotated[Text, Field(max_length=64, description="a role from roles/")]


class StartTaskInput(ToolInput):
    request: Annotated[Text, Field(max_length=40_000, description="what the team should do")]
    role: RoleName | None = None
    repository: Annotated[Text, Field(max_length=64)] | None = None
    channel: ChannelId | None = None
    threadTs: ThreadTs | None = None  # noqa: N815 (the field name clients see)


async def start_task(
    svc: McpService, person: Person, args: StartTaskInput, report: Report
) -> dict[str, Any]:
    orch = svc.orchestrator
    if args.threadTs and not args.channel:
        raise ToolError("INVALID_INPUT", "threadTs needs its channel", "pass channel too")
    _check_role(svc, args.role)
    allowed = orch.config.slack.allowed_channels
    if args.channel and allowed and args.channel not in allowed:  # as the bot refuses them
        raise ToolError(
            "PERMISSION_DENIED",
            f"channel {args.channel} is not in slack.allowedChannels",
            f"use one of: {', '.join(allowed)}",
        )
    text, repository = _repository(svc, args.request, args.repository, args.channel)
    existing = None
    if args.channel and args.threadTs:
        existing = await orch.tasks.find_task(ThreadRef(args.channel, args.threadTs))
        if existing is not None:  # a follow-up in that thread's task
            existing = await svc.task_for(person, existing.slug)
    if existing is not None:
        role = args.role or orch.route_follow_up(existing, text)
    else:
        role = args.role or orch.route(text)
    thread = None
    if args.channel:
        thread = await _announcer(svc).open_thread(
            args.channel, args.threadTs, args.request, person.name
        )
    if existing is not None:
        handle = await orch.draft(role, text, task_slug=existing.slug, requested_by=person.name)
    elif thread is not None:
        task = await orch.tasks.create_task(text, thread, repository, requester=person.name)
        handle = await orch.draft(role, text, task_slug=task.slug, requested_by=person.name)
    else:
        handle = await orch.draft(role, text, repository=repository, requested_by=person.name)
    if thread is not None:
        svc.follow_thread(handle.task_slug, thread)
    return await _started(svc, handle, thread)


class DraftAgentInput(ToolInput):
    taskSlug: TaskSlug  # noqa: N815
    prompt: Annotated[Text, Field(max_length=40_000, description="what the agent should do")]
    role: RoleName | None = None


async def draft_agent(
    svc: McpService, person: Person, args: DraftAgentInput, report: Report
) -> dict[str, Any]:
    orch = svc.orchestrator
    _check_role(svc, args.role)
    task = await svc.task_for(person, args.taskSlug)
    role = args.role or orch.route_follow_up(task, args.prompt)
    thread = task.thread
    if thread is not None and svc.announcer is not None:  # the team follows it there
        await svc.announcer.open_thread(thread.channel, thread.thread_ts, args.prompt, person.name)
    handle = await orch.draft(role, args.prompt, task_slug=task.slug, requested_by=person.name)
    if thread is not None and svc.announcer is not None:
        svc.follow_thread(task.slug, thread)
    return await _started(svc, handle, thread)


class AwaitAgentInput(ToolInput):
    agentId: AgentId  # noqa: N815
    timeoutSeconds: Seconds | None = Field(  # noqa: N815
        None, description="give up waiting after this many seconds ({timedOut: true})"
    )


async def await_agent(
    svc: McpService, person: Person, args: AwaitAgentInput, report: Report
) -> dict[str, Any]:
    """Waits for the agent's final record, saying what it does meanwhile (its events, its
    questions, and every few seconds that it still works)."""
    orch = svc.orchestrator
    agent_id = args.agentId
    await svc.task_of_agent(person, agent_id)
    with svc.watch.follow(agent_id) as lines:
        for question in orch.humans.pending_questions():
            if question.agent_id == agent_id:
                lines.put_nowait(question_line(question))
        ending = asyncio.ensure_future(_final(svc, agent_id))
        line: asyncio.Future[str] | None = None
        try:
            async with asyncio.timeout(args.timeoutSeconds):
                if lines.empty() and not ending.done():  # the client hears at once where it is
                    await report(await _still(svc, agent_id))
                while not ending.done():
                    line = asyncio.ensure_future(lines.get())
                    done, _ = await asyncio.wait(
                        {ending, line}, timeout=HEARTBEAT_SECONDS,
                        return_when=asyncio.FIRST_COMPLETED,
                    )  # fmt: skip
                    if line.done():
                        await report(line.result())
                    elif not done:
                        await report(await _still(svc, agent_id))
        except TimeoutError:
            current = await orch.record(agent_id)
            return {"agentId": agent_id, "status": current.status, "timedOut": True}
        finally:
            for waiting in (ending, line):
                if waiting is not None and not waiting.done():
                    waiting.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await waiting
        record = ending.result()
        while not lines.empty():  # what was said as it ended
            await report(lines.get_nowait())
        await report(f"{record.role} {agent_id} {record.status}")
        return record_json(record)


async def _final(svc: McpService, agent_id: str) -> DispatchRecord:
    orch = svc.orchestrator
    if orch.agent(agent_id) is not None:
        return await orch.wait(agent_id)
    record = await orch.record(agent_id)
    while record.status not in FINAL_STATUSES:  # another harness process runs it: its record
        await asyncio.sleep(ELSEWHERE_POLL_SECONDS)
        record = await orch.record(agent_id)
    return record


async def _still(svc: McpService, agent_id: str) -> str:
    live = svc.orchestrator.agent(agent_id)
    if live is None:
        record = await svc.orchestrator.record(agent_id)
        return f"{record.role} {agent_id} {record.status} (in another harness process)"
    return f"{live.role} {agent_id} {live.status} for {live.elapsed_seconds:.0f} s: {live.activity}"


class AgentIdInput(ToolInput):
    agentId: AgentId  # noqa: N815


async def kill_agent(
    svc: McpService, person: Person, args: AgentIdInput, report: Report
) -> dict[str, Any]:
    orch = svc.orchestrator
    agent_id = args.agentId
    task = await svc.task_of_agent(person, agent_id)
    if orch.agent(agent_id) is None:
        record = await orch.record(agent_id)
        if record.status in FINAL_STATUSES:
            raise ToolError(
                "INVALID_AGENT_STATE",
                f"agent {agent_id} already ended ({record.status})",
                "nothing to kill; await_agent gives its result",
            )
        raise ToolError(
            "INVALID_AGENT_STATE",
            f"agent {agent_id} runs in another harness process (e.g. the Slack bot)",
            f"stop it there: `/harness kill {agent_id}` in Slack",
        )
    await orch.kill(agent_id, f"killed by {person.name} via MCP", by=person.by)
    try:
        record = await orch.wait(agent_id, KILL_WAIT_SECONDS)
    except TimeoutError:
        return {"success": False, "message": f"agent {agent_id} is still stopping",
                "taskSlug": task.slug}  # fmt: skip
    return {
        "success": True,
        "message": f"agent {agent_id} stopped ({record.status})",
        "taskSlug": task.slug,
    }


class EmptyInput(ToolInput):
    pass


async def list_agents(
    svc: McpService, person: Person, args: EmptyInput, report: Report
) -> dict[str, Any]:
    """The queued and running agents of the tasks the caller sees: this server's, and those
    other harness processes (the bot) run, from the task store."""
    orch = svc.orchestrator
    summaries = await svc.visible(person, await orch.tasks.task_summaries())
    seen = {s.slug for s in summaries}
    here = [a for a in orch.agents() if a.task_slug in seen]
    listed = [{**info_json(a), "where": "here"} for a in here]
    live = {a.agent_id for a in here}
    for summary in summaries:
        if summary.status not in ("running", "queued"):
            continue
        task = await orch.tasks.task(summary.slug)
        for d in task.dispatches:
            if d.status not in FINAL_STATUSES and d.agent_id not in live:
                listed.append({
                    "id": d.agent_id, "role": d.role, "taskSlug": task.slug,
                    "startedAt": d.started_at, "status": d.status, "parentId": d.parent_id,
                    "where": "another harness process",
                })  # fmt: skip
    return {"agents": listed, "total_count": len(listed)}


# -- helpers ---------------------------------------------------------------------------------


def _check_role(svc: McpService, role: str | None) -> None:
    names = svc.orchestrator.role_names()
    if role is not None and role not in names:
        raise ToolError(
            "INVALID_INPUT", f"unknown role {role!r}", f"use one of: {', '.join(names)}"
        )


def _repository(
    svc: McpService, request: str, named: str | None, channel: str | None
) -> tuple[str, str | None]:
    """The request's text and repository: ``named``, else as in Slack (``repo:NAME`` in it,
    the channel's default, the configured default, the only one)."""
    known = sorted(svc.orchestrator.config.workspaces.repositories)
    if named is not None:
        if named not in known:
            raise ToolError(
                "INVALID_INPUT",
                f"unknown repository {named!r}",
                f"use one of: {', '.join(known)}"
                if known
                else "leave repository out: none is configured, the task gets a scratch folder",
            )
        return request, named
    choice = svc.orchestrator.tasks.choose_repository(request, channel)
    problem = choice.explain()
    if problem is not None:
        raise ToolError("INVALID_INPUT", problem, f"pass repository: one of {', '.join(known)}")
    return choice.text, choice.repository


def _announcer(svc: McpService) -> Any:
    if svc.announcer is None:
        raise ToolError(
            "INVALID_INPUT",
            "cannot post in a channel: no Slack bot token where harness mcp runs",
            "set SLACK_BOT_TOKEN in harness mcp's environment, or leave channel out",
        )
    return svc.announcer


async def _started(
    svc: McpService, handle: AgentHandle, thread: ThreadRef | None
) -> dict[str, Any]:
    live = svc.orchestrator.agent(handle.agent_id)
    status = live.status if live else (await svc.orchestrator.record(handle.agent_id)).status
    return {
        "agentId": handle.agent_id,
        "role": handle.role,
        "taskSlug": handle.task_slug,
        "status": status,
        "thread": {"channel": thread.channel, "threadTs": thread.thread_ts} if thread else None,
    }


AGENT_TOOLS = (
    McpTool(
        "start_task",
        "Start a new task for the team: an agent of `role` (default: routed from the request, "
        "as in Slack) works on `request` in `repository` (default: `repo:NAME` in the request, "
        "else the configured one). With `channel` the request is posted there and its thread "
        "becomes the task's, where the result is posted too (with `threadTs`: in that "
        "thread, following up on its task). Returns at once with agentId and taskSlug; "
        "await_agent waits for the result.",
        StartTaskInput,
        start_task,
    ),
    McpTool(
        "draft_agent",
        "Start another agent on an existing task (a follow-up): it sees the task's history "
        "before `prompt`. Role default: the last one's when it asked questions, else routed.",
        DraftAgentInput,
        draft_agent,
    ),
    McpTool(
        "await_agent",
        "Wait for an agent to finish; returns its status, structured result (summary, "
        "changes, issues, questions), cost and duration. Sends progress notifications while "
        "it waits (what the agent does, the approvals and questions it waits on).",
        AwaitAgentInput,
        await_agent,
        read_only=True,
    ),
    McpTool(
        "kill_agent",
        "Stop a queued or running agent (the task's requester or an admin).",
        AgentIdInput,
        kill_agent,
    ),
    McpTool(
        "list_agents",
        "The queued and running agents of the tasks you see, with where they run.",
        EmptyInput,
        list_agents,
        read_only=True,
    ),
)
