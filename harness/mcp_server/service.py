"""The MCP server's state over the orchestrator: who is calling, which tasks they see, the
tasks it posted in a channel (their agents' results go there), and one tool call served
end to end: validated, handled, mapped to the harness's error shape, audited."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from harness.agents.events import AgentEvent
from harness.agents.orchestrator import Orchestrator
from harness.agents.visibility import may_see, needs_channels, visible
from harness.errors import (
    AgentNotFoundError,
    HarnessError,
    InvalidSlugError,
    LimitError,
    NotAllowedError,
    TaskDamagedError,
    TaskNotFoundError,
    ToolError,
    UnknownRoleError,
)
from harness.mcp_server.access import Person
from harness.mcp_server.announce import Announcer
from harness.mcp_server.watch import AgentWatch, HumanDesk
from harness.tasks.model import FINAL_STATUSES, Task, TaskSummary, ThreadRef
from harness.tools.validation import ToolInput, validate

logger = logging.getLogger(__name__)

# Says a line of progress to the client waiting on a call (a no-op when it asked for none).
Report = Callable[[str], Awaitable[None]]
Handler = Callable[["McpService", Person, Any, Report], Awaitable[dict[str, Any]]]

_AUDIT_VALUE_LIMIT = 2000
# How long a stop waits for the results still being posted.
POST_GRACE_SECONDS = 10.0


@dataclass(frozen=True)
class McpTool:
    name: str
    description: str
    input: type[ToolInput]
    handler: Handler
    read_only: bool = False


class McpService:
    def __init__(self, orchestrator: Orchestrator, announcer: Announcer | None) -> None:
        self.orchestrator = orchestrator
        self.announcer = announcer
        self.watch = AgentWatch()
        # Tasks whose thread this server posted to or follows: its agents' results go there.
        self._announced: dict[str, ThreadRef] = {}
        # Results being posted: a stop waits for them (bounded), so a result is not lost.
        self._posting: set[asyncio.Task[None]] = set()

    async def start(self) -> None:
        """Begins this process's run (its lock under ``<tasks>/.runs/``, as ``harness run``
        and the bot do: a live process's agents are never taken for a dead one's), marks
        what dead processes left running interrupted, and listens to the agents."""
        await self.orchestrator.recover_interrupted()
        self.orchestrator.humans.add_human_channel(HumanDesk(self.watch))
        self.orchestrator.subscribe(self.watch.on_event)
        self.orchestrator.subscribe(self._on_event)

    async def close(self) -> None:
        await self.orchestrator.shutdown("the MCP server stopped")
        if self._posting:  # the results of agents that ended, the stopped ones' included
            await asyncio.wait(self._posting, timeout=POST_GRACE_SECONDS)
        if self.announcer is not None:
            await self.announcer.close()

    # -- one call ---------------------------------------------------------------------------

    async def call(
        self, tool: McpTool, args: Mapping[str, Any], person: Person, report: Report
    ) -> tuple[dict[str, Any], bool]:
        """The tool's JSON result, or its error ``{"error": {code, message, suggestion}}``
        (True). Never raises."""
        started = self.orchestrator.clock.monotonic()
        try:
            checked = validate(tool.name, args, tool.input)
            payload, failed, outcome = (
                await tool.handler(self, person, checked, report),
                False,
                "ok",
            )
        except ToolError as exc:
            payload, failed, outcome = exc.to_json(), True, exc.code
        except HarnessError as exc:
            error = as_tool_error(exc)
            payload, failed, outcome = error.to_json(), True, error.code
        except Exception as exc:  # the boundary: one bad call must not take the server down
            logger.exception("MCP tool %s failed", tool.name)
            error = ToolError(
                "INTERNAL_ERROR",
                f"{tool.name} failed inside the harness: {exc}",
                "retry once; if it fails again, see the harness mcp log",
            )
            payload, failed, outcome = error.to_json(), True, error.code
        if not tool.read_only:
            self._audit(tool.name, args, payload, person, outcome, started)
        return payload, failed

    def _audit(
        self,
        tool: str,
        args: Mapping[str, Any],
        payload: Mapping[str, Any],
        person: Person,
        outcome: str,
        started: float,
    ) -> None:
        slug = args.get("taskSlug") or payload.get("taskSlug")
        if not isinstance(slug, str) or not slug:
            return
        entry = {
            "time": self.orchestrator.now(),
            "tool": f"mcp:{tool}",
            # No agent called: a person, through MCP (`harness audit` shows "mcp <who>").
            "callerAgentId": person.name,
            "callerRole": "mcp",
            "callerUser": person.name,
            "task": slug,
            "input": {k: _clip(v) for k, v in args.items()},
            "outcome": outcome,
            "durationMs": round((self.orchestrator.clock.monotonic() - started) * 1000, 1),
        }
        with contextlib.suppress(HarnessError, OSError):  # a task deleted meanwhile
            self.orchestrator.tasks.audit(slug, entry)

    # -- who sees what ----------------------------------------------------------------------

    async def member_of(
        self, person: Person, threads: Iterable[ThreadRef | None]
    ) -> frozenset[str] | None:
        """The channels ``person`` is in, asked of Slack only when they decide what they see
        of tasks in ``threads``; None when not asked or Slack would not say."""
        if person.user is None or self.announcer is None:
            return None
        if not needs_channels(person.viewer, threads):
            return None
        return await self.announcer.channels_of(person.user)

    async def visible(self, person: Person, summaries: list[TaskSummary]) -> list[TaskSummary]:
        member_of = await self.member_of(person, (s.thread for s in summaries))
        may_decide = self.orchestrator.humans.may_decide
        return visible(person.viewer, summaries, may_decide=may_decide, member_of=member_of)

    async def task_for(self, person: Person, slug: str) -> Task:
        """The task, when ``person`` sees it; else RESOURCE_NOT_FOUND, as if it were not."""
        task = await self.orchestrator.tasks.task(slug)
        member_of = await self.member_of(person, (task.thread,))
        may_decide = self.orchestrator.humans.may_decide
        if not may_see(person.viewer, task.thread, task.requester,
                       may_decide=may_decide, member_of=member_of):  # fmt: skip
            raise _no_task(slug)
        return task

    async def task_of_agent(self, person: Person, agent_id: str) -> Task:
        live = self.orchestrator.agent(agent_id)
        slug = live.task_slug if live is not None else None
        if slug is None:
            slug = await self._slug_of_record(agent_id)
        try:
            return await self.task_for(person, slug)
        except ToolError:
            raise _no_agent(agent_id) from None

    async def _slug_of_record(self, agent_id: str) -> str:
        for summary in await self.orchestrator.tasks.task_summaries():
            task = await self.orchestrator.tasks.task(summary.slug)
            if any(d.agent_id == agent_id for d in task.dispatches):
                return task.slug
        raise _no_agent(agent_id)

    # -- threads and results ----------------------------------------------------------------

    def follow_thread(self, task_slug: str, thread: ThreadRef) -> None:
        """Post the results of the task's agents that end here in ``thread``."""
        self._announced[task_slug] = thread

    def _on_event(self, event: AgentEvent) -> None:
        thread = self._announced.get(event.task.slug)
        if event.kind != "finished" or event.record.status not in FINAL_STATUSES:
            return
        if thread is not None and self.announcer is not None:
            posting = asyncio.ensure_future(self._post(self.announcer, thread, event))
            self._posting.add(posting)
            posting.add_done_callback(self._posting.discard)

    async def _post(self, announcer: Announcer, thread: ThreadRef, event: AgentEvent) -> None:
        record = event.record
        diff = None
        with contextlib.suppress(HarnessError, OSError):
            diff = await self.orchestrator.tasks.diff(event.task.slug, record)
        try:
            await announcer.post_result(thread, event.task.slug, record, diff)
        except Exception as exc:  # noqa: BLE001 - Slack refused or is away: the task keeps it
            logger.warning("could not post %s's result in its thread: %s", record.agent_id, exc)
            with contextlib.suppress(HarnessError, OSError):
                await self.orchestrator.tasks.note_undelivered(
                    event.task.slug, record.agent_id, f"MCP server: {exc}"
                )


def as_tool_error(exc: HarnessError) -> ToolError:
    """A harness error in the tools' error shape, with its code."""
    if isinstance(exc, ToolError):
        return exc
    if isinstance(exc, AgentNotFoundError):
        return ToolError("AGENT_NOT_FOUND", exc.message, "call list_agents for the agent ids")
    if isinstance(exc, (TaskNotFoundError, InvalidSlugError)):
        return ToolError("RESOURCE_NOT_FOUND", exc.message, "call list_tasks for the task slugs")
    if isinstance(exc, NotAllowedError):
        return ToolError("PERMISSION_DENIED", exc.message, exc.fix)
    if isinstance(exc, UnknownRoleError):
        return ToolError("INVALID_INPUT", exc.message, exc.fix)
    if isinstance(exc, LimitError):
        return ToolError(exc.code, exc.message, exc.fix)
    if isinstance(exc, TaskDamagedError):
        return ToolError("RESOURCE_DAMAGED", exc.message, exc.fix)
    return ToolError("FAILED", exc.message, exc.fix or "see the message")


def _no_task(slug: str) -> ToolError:
    return ToolError("RESOURCE_NOT_FOUND", f"no task {slug!r}", "call list_tasks for the slugs")


def _no_agent(agent_id: str) -> ToolError:
    return ToolError(
        "AGENT_NOT_FOUND", f"no agent {agent_id!r}", "call list_agents for the agent ids"
    )


def _clip(value: Any) -> Any:
    if isinstance(value, str) and len(value) > _AUDIT_VALUE_LIMIT:
        return value[:_AUDIT_VALUE_LIMIT] + f"… [{len(value) - _AUDIT_VALUE_LIMIT} chars more]"
    return value
