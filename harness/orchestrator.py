"""The orchestrator: the one facade the CLI, the MCP tools and the Slack bot all use.

It ties the pieces together: roles and routing pick who works, the task store keeps what
happened, the context builder hands history forward, the pool runs agents under a cap.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import os
import secrets
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal, Protocol

from claude_agent_sdk.types import McpSdkServerConfig

from harness.config import Config
from harness.context import build_task_context
from harness.errors import AgentNotFoundError, UnknownRoleError
from harness.metadata import MetadataCollector
from harness.pool import AgentInfo, AgentPool, PoolEntry
from harness.questions import QuestionBoard
from harness.results import (
    FINAL_STATUSES,
    DispatchRecord,
    DispatchStatus,
    Progress,
    Task,
    ThreadRef,
)
from harness.roles import Role
from harness.routing import Router
from harness.runtime import AgentRuntime, AgentSpec, RunOutcome, ToolUse
from harness.tasks import TaskStore, journal_file_name

logger = logging.getLogger(__name__)


def utc_now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


class ToolProvider(Protocol):
    """Gives each agent the harness MCP server of its access profile (see harness.mcp)."""

    def server_for(self, role: Role) -> tuple[McpSdkServerConfig | None, tuple[str, ...]]: ...

    def note_tool_use(self, agent_id: str, use: ToolUse) -> None: ...


EventKind = Literal["queued", "started", "progress", "finished"]


@dataclass(frozen=True)
class AgentEvent:
    kind: EventKind
    task: Task
    record: DispatchRecord


Listener = Callable[[AgentEvent], Awaitable[None] | None]


@dataclass(frozen=True)
class AgentHandle:
    agent_id: str
    role: str
    task_slug: str


def compose_prompt(task: Task, prompt: str, *, budget_chars: int) -> str:
    """The task's reconstructed history first, then what this agent is asked to do."""
    has_history = any(d.result is not None for d in task.dispatches)
    if not has_history and task.description.strip() == prompt.strip():
        return prompt
    context = build_task_context(task, budget_chars=budget_chars)
    return f"{context}\n\n## Your Assignment\n\n{prompt}"


class Orchestrator:
    def __init__(
        self,
        config: Config,
        roles: Mapping[str, Role],
        store: TaskStore,
        runtime: AgentRuntime,
        *,
        child_env: Mapping[str, str] | None = None,
    ) -> None:
        self.config = config
        self.roles = dict(roles)
        self.store = store
        self.runtime = runtime
        self.router = Router(config.rules, config.default_role)
        self.pool = AgentPool(config.mcp.max_concurrent_agents)
        self.tools: ToolProvider | None = None
        self._child_env = {
            # MCP tools are offered directly, not behind ToolSearch.
            "ENABLE_TOOL_SEARCH": "false",
            # A long await_agent must not be cut off by the CLI's MCP timeout.
            "MCP_TOOL_TIMEOUT": str(config.mcp.tool_timeout_ms),
            **(child_env or {}),
        }
        self._finished: dict[str, asyncio.Future[DispatchRecord]] = {}
        self._runs: set[asyncio.Task[None]] = set()
        self._notifications: set[asyncio.Future[Any]] = set()
        self._listeners: list[Listener] = []
        self.questions = QuestionBoard()
        # One collector (and so one cache) for every front end and the MCP tools.
        self.metadata = MetadataCollector(config.metadata)

    # -- roles, routing, tasks -------------------------------------------------------------

    def role(self, name: str) -> Role:
        role = self.roles.get(name)
        if role is None:
            raise UnknownRoleError(name, list(self.roles))
        return role

    def route(self, text: str, last_role: str | None = None) -> str:
        return self.router.route(text, last_role)

    def route_follow_up(self, task: Task, text: str) -> str:
        """The role for a follow-up on ``task``: when the last agent asked questions, the
        reply answers them, so it goes back to that role; else routing, else the last role."""
        top = [d for d in task.dispatches if d.parent_id is None]
        if top and top[-1].result is not None and top[-1].result.questions:
            return top[-1].role
        return self.route(text, self.last_role(task))

    @staticmethod
    def last_role(task: Task) -> str | None:
        """The role of the task's most recent top-level dispatch (what a follow-up keeps)."""
        top = [d for d in task.dispatches if d.parent_id is None]
        return top[-1].role if top else None

    def create_task(self, description: str, thread: ThreadRef | None = None) -> Task:
        return self.store.create(description, thread)

    def subscribe(self, listener: Listener) -> None:
        self._listeners.append(listener)

    # -- agents ----------------------------------------------------------------------------

    def draft(
        self,
        role_name: str,
        prompt: str,
        *,
        task_slug: str | None = None,
        parent_id: str | None = None,
    ) -> AgentHandle:
        """Start an agent and return at once. Without task_slug a new task is created from the
        prompt. The agent sees the task's history before the prompt."""
        role = self.role(role_name)
        task = self.store.get(task_slug) if task_slug else self.store.create(prompt)
        parent = self.pool.get(parent_id) if parent_id else None
        agent_id = self._new_agent_id()
        cwd = role.cwd or self.config.base_dir
        record = DispatchRecord(
            agent_id=agent_id,
            role=role.name,
            cwd=str(cwd),
            model=role.model,
            started_at=utc_now(),
            status="queued",
            journal_file=journal_file_name(agent_id),
            prompt=prompt,
            parent_id=parent_id,
            host_pid=os.getpid(),
        )
        task = self.store.save_dispatch(task.slug, record)
        entry = PoolEntry(
            agent_id=agent_id,
            role=role.name,
            task_slug=task.slug,
            cwd=cwd,
            parent_id=parent_id,
            depth=parent.depth + 1 if parent else 1,
            queued_at=record.started_at,
        )
        self.pool.register(entry)
        self._finished[agent_id] = asyncio.get_running_loop().create_future()
        full_prompt = compose_prompt(task, prompt, budget_chars=self.config.context_budget_chars)
        run = asyncio.create_task(self._run(entry, role, record, full_prompt), name=agent_id)
        self._runs.add(run)
        run.add_done_callback(self._runs.discard)
        self._emit(AgentEvent("queued", task, record))
        return AgentHandle(agent_id=agent_id, role=role.name, task_slug=task.slug)

    async def run(
        self, role_name: str, prompt: str, *, task_slug: str | None = None
    ) -> DispatchRecord:
        handle = self.draft(role_name, prompt, task_slug=task_slug)
        return await self.wait(handle.agent_id)

    async def wait(self, agent_id: str, timeout: float | None = None) -> DispatchRecord:
        """The agent's final record; waits while it runs. TimeoutError after ``timeout``."""
        done = self._finished.get(agent_id)
        if done is None:
            return self._stored_record(agent_id)
        return await asyncio.wait_for(asyncio.shield(done), timeout)

    def record(self, agent_id: str) -> DispatchRecord:
        """The agent's current record, live or finished."""
        entry = self.pool.get(agent_id)
        if entry is not None:
            return self._find_record(self.store.get(entry.task_slug), agent_id)
        done = self._finished.get(agent_id)
        if done is not None and done.done():
            return done.result()
        return self._stored_record(agent_id)

    def agents(self) -> list[AgentInfo]:
        return self.pool.snapshot()

    def agent(self, agent_id: str) -> AgentInfo | None:
        """One live agent's snapshot; None once it has ended (see ``record``)."""
        return self.pool.info(agent_id)

    def report_progress(self, agent_id: str, message: str, percent: float | None) -> DispatchRecord:
        """Keep a live agent's progress in its record and tell the front ends."""
        entry = self.pool.get(agent_id)
        if entry is None:
            raise AgentNotFoundError(agent_id)
        entry.progress = Progress(message=message, at=utc_now(), percent=percent)
        entry.control.activity = message if percent is None else f"{message} ({percent:g}%)"
        record = dataclasses.replace(self.record(agent_id), progress=entry.progress)
        self._emit(
            AgentEvent("progress", self.store.save_dispatch(entry.task_slug, record), record)
        )
        return record

    async def kill(self, agent_id: str, reason: str) -> bool:
        """End a queued or running agent. False when it is not live."""
        return await self.pool.kill(agent_id, reason)

    async def shutdown(self, reason: str = "the harness shut down") -> None:
        """Stop every agent (dispatches end ``interrupted``) and wait for their records."""
        await self.pool.kill_all(reason, interrupted=True)
        if self._runs:
            await asyncio.gather(*self._runs, return_exceptions=True)

    def recover_interrupted(self) -> int:
        """Mark dispatches that a crashed harness left queued/running as ``interrupted``."""
        count = 0
        for task in self.store.list():
            for d in task.dispatches:
                if d.status in FINAL_STATUSES or _pid_alive(d.host_pid):
                    continue
                self.store.save_dispatch(
                    task.slug,
                    dataclasses.replace(
                        d,
                        status="interrupted",
                        completed_at=utc_now(),
                        error=f"the harness process (pid {d.host_pid}) stopped before the "
                        "agent finished",
                    ),
                )
                count += 1
        return count

    # -- internals -------------------------------------------------------------------------

    async def _run(self, entry: PoolEntry, role: Role, record: DispatchRecord, prompt: str) -> None:
        slug = entry.task_slug
        outcome: RunOutcome | None = None
        try:
            if await self.pool.acquire(entry):
                entry.state = "running"
                entry.started_at = utc_now()
                record = dataclasses.replace(record, status="running", started_at=entry.started_at)
                self._emit(AgentEvent("started", self.store.save_dispatch(slug, record), record))
                outcome = await self.runtime.run(
                    self._spec(entry, role, prompt),
                    entry.control,
                    on_message=lambda m: self.store.append_jsonl(slug, record.journal_file, m),
                    on_tool_use=lambda use: self._note_tool_use(entry.agent_id, use),
                )
            else:
                outcome = RunOutcome(status="killed", error=entry.control.kill_reason)
        except Exception as exc:  # top of an agent's life: the record must still be written
            logger.exception("agent %s crashed in the harness", entry.agent_id)
            outcome = RunOutcome(status="failed", error=f"internal harness error: {exc}")
        finally:
            self.pool.release(entry)
            final = self._final_record(record, entry, outcome)
            task = self.store.save_dispatch(slug, final)
            self._finished[entry.agent_id].set_result(final)
            self._emit(AgentEvent("finished", task, final))

    def _final_record(
        self, record: DispatchRecord, entry: PoolEntry, outcome: RunOutcome | None
    ) -> DispatchRecord:
        if outcome is None:  # cancelled from outside
            outcome = RunOutcome(status="killed", error=entry.control.kill_reason or "cancelled")
        status: DispatchStatus = outcome.status
        if entry.interrupted and outcome.status == "killed":
            status = "interrupted"
        return dataclasses.replace(
            record,
            status=status,
            progress=entry.progress,
            completed_at=utc_now(),
            result=outcome.result,
            error=outcome.error,
            last_text=outcome.last_text,
            cost_usd=outcome.cost_usd,
            turns=outcome.turns,
            duration_ms=outcome.duration_ms,
        )

    def _spec(self, entry: PoolEntry, role: Role, prompt: str) -> AgentSpec:
        server, tool_names = self.tools.server_for(role) if self.tools else (None, ())
        return AgentSpec(
            agent_id=entry.agent_id,
            role=role,
            prompt=prompt,
            cwd=entry.cwd,
            mcp_server=server,
            mcp_tools=tool_names,
            env=self._child_env,
        )

    async def _note_tool_use(self, agent_id: str, use: ToolUse) -> None:
        entry = self.pool.get(agent_id)
        if entry is not None:
            entry.control.activity = f"using {use.name}"
        if self.tools is not None:
            self.tools.note_tool_use(agent_id, use)

    def _emit(self, event: AgentEvent) -> None:
        for listener in self._listeners:
            outcome = listener(event)
            if asyncio.iscoroutine(outcome):
                task = asyncio.ensure_future(outcome)
                self._notifications.add(task)
                task.add_done_callback(_log_listener_failure)
                task.add_done_callback(self._notifications.discard)

    def _stored_record(self, agent_id: str) -> DispatchRecord:
        for task in self.store.list():
            if any(d.agent_id == agent_id for d in task.dispatches):
                return self._find_record(task, agent_id)
        raise AgentNotFoundError(agent_id)

    @staticmethod
    def _find_record(task: Task, agent_id: str) -> DispatchRecord:
        for d in task.dispatches:
            if d.agent_id == agent_id:
                return d
        raise AgentNotFoundError(agent_id)

    def _new_agent_id(self) -> str:
        while True:
            agent_id = "a" + secrets.token_hex(3)
            if agent_id not in self._finished:
                return agent_id


def _log_listener_failure(task: asyncio.Future[Any]) -> None:
    if not task.cancelled() and task.exception() is not None:
        logger.error("an agent event listener failed", exc_info=task.exception())


def _pid_alive(pid: int | None) -> bool:
    if pid is None:
        return False
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
