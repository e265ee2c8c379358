"""The orchestrator: the one facade the CLI, the tool layer and the Slack bot all use.

It ties the pieces together: roles and routing pick who works, the dispatcher queues agents
within the task's caps, the runs carry them to their final records on the hosting, the task
store keeps what happened, the pool runs agents under a cap, the question board waits on
humans and the authority says who may decide. Those parts are private; callers use the
methods below and those about tasks (``task_methods.py``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
from collections.abc import AsyncIterator, Callable, Iterable, Mapping, Sequence
from pathlib import Path

from harness.agents.authority import Authority
from harness.agents.dispatching import AgentHandle, Dispatcher
from harness.agents.events import AgentEvent, Events, Listener
from harness.agents.forge_accounts import ForgeAccountMethods
from harness.agents.human_methods import HumanMethods
from harness.agents.metadata import FieldValue, MetadataCollector
from harness.agents.pool import AgentInfo, AgentPool, PoolEntry
from harness.agents.pull_requests import PullRequestMethods
from harness.agents.questions import QuestionBoard
from harness.agents.recovery import recover_interrupted
from harness.agents.runs import AgentRuns, ToolProvider
from harness.agents.shared_files import FileSharingMethods
from harness.agents.task_methods import TaskMethods
from harness.clock import SYSTEM, Clock, timestamp
from harness.config.roles import Role
from harness.config.routing import Router
from harness.config.settings import Config, MetadataField
from harness.errors import (
    AgentNotFoundError,
    HarnessError,
    UnknownRoleError,
)
from harness.runtime.attachments import Attachment, LeftOut
from harness.runtime.spec import MODEL_API_RETRIES_ENV, Hosting
from harness.tasks.journal import said_in
from harness.tasks.model import (
    Decision,
    DispatchRecord,
    Feedback,
    FeedbackValue,
    Task,
)
from harness.tasks.store import (
    Store,
)
from harness.workspaces.manager import (
    Workspaces,
)

logger = logging.getLogger(__name__)

ToolProviderFactory = Callable[["Orchestrator"], ToolProvider]


class Orchestrator(
    TaskMethods, HumanMethods, PullRequestMethods, ForgeAccountMethods, FileSharingMethods
):
    def __init__(
        self,
        config: Config,
        roles: Mapping[str, Role],
        store: Store,
        hosting: Hosting,
        *,
        workspaces: Workspaces,
        tools: ToolProviderFactory,
        child_env: Mapping[str, str] | None = None,
        simulated_costs: bool = False,
        clock: Clock = SYSTEM,
    ) -> None:
        self._config = config
        self._roles = dict(roles)
        self._store = store
        self._hosting = hosting
        self._router = Router(config.rules, config.default_role)
        self._pool = AgentPool(config.mcp.max_concurrent_agents)
        self._clock = clock
        self._questions = QuestionBoard(clock)
        self._authority = Authority(config.slack.admins)
        # One collector (and so one cache) for every front end and the tools.
        self._metadata = MetadataCollector(config.metadata, sandboxed=config.sandbox.enabled)
        self._workspaces = workspaces
        self._events = Events[AgentEvent]()
        # An agent that ends leaves no question open: its buttons close saying it ended.
        self._events.subscribe(
            lambda event: (
                self._questions.end_agent(event.record.agent_id)
                if event.kind == "finished"
                else None
            )
        )
        child_env = {
            # MCP tools are offered directly, not behind ToolSearch.
            "ENABLE_TOOL_SEARCH": "false",
            # A long await_agent must not be cut off by the CLI's MCP timeout.
            "MCP_TOOL_TIMEOUT": str(config.mcp.tool_timeout_ms),
            # A failing model API: this many retries, each shown as the agent's progress.
            MODEL_API_RETRIES_ENV: str(config.model_api_retries),
            **(child_env or {}),
        }
        self._runs = AgentRuns(
            config,
            store,
            hosting,
            self._pool,
            self._events,
            tools=tools(self),
            child_env=child_env,
            clock=clock,
        )
        self._pending = self._runs.pending
        self._init_pull_requests()
        self._init_forge_accounts()
        self._init_file_sharing()
        # A writer that ends on a task with a pull request: its commits go there too.
        self._events.subscribe(self._on_agent_event)
        self._dispatcher = Dispatcher(
            config,
            self._roles,
            store,
            hosting,
            self._pool,
            self._runs,
            self._events,
            clock=clock,
            simulated_costs=simulated_costs,
        )

    # -- settings, roles, routing -----------------------------------------------------------

    @property
    def config(self) -> Config:
        return self._config

    def now(self) -> str:
        """The time to stamp a record or a log line with, from the harness's clock."""
        return timestamp(self._clock.now())

    def role(self, name: str) -> Role:
        role = self._roles.get(name)
        if role is None:
            raise UnknownRoleError(name, list(self._roles))
        return role

    def role_names(self) -> list[str]:
        return sorted(self._roles)

    def route(self, text: str, last_role: str | None = None) -> str:
        return self._router.route(text, last_role)

    def route_follow_up(self, task: Task, text: str) -> str:
        """The role for a follow-up on ``task``: when the last agent asked questions, the
        reply answers them, so it goes back to that role; else routing, else the last role."""
        top = [d for d in task.dispatches if d.parent_id is None]
        if top and top[-1].result is not None and top[-1].result.questions:
            return top[-1].role
        return self.route(text, top[-1].role if top else None)

    def subscribe(self, listener: Listener) -> None:
        self._events.subscribe(listener)

    # -- humans' rights ---------------------------------------------------------------------

    def may_decide(self, user: str, requester: str | None) -> bool:
        """Whether ``user`` may approve, stop and run again the agents of a task asked for by
        ``requester``: they, or an admin."""
        return self._authority.may_decide(user, requester)

    async def log_decision(self, agent_id: str, title: str, body: str) -> Task:
        entry = self._live(agent_id)
        decision = Decision(title, body, at=self.now(), agent_id=agent_id, role=entry.role)
        return await self._store.add_decision(entry.task_slug, decision)

    # -- agents ----------------------------------------------------------------------------

    async def draft(
        self,
        role_name: str,
        prompt: str,
        *,
        task_slug: str | None = None,
        parent_id: str | None = None,
        repository: str | None = None,
        requested_by: str | None = None,
        attachments: Sequence[Attachment] = (),
        left_out: Sequence[LeftOut] = (),
    ) -> AgentHandle:
        """Start an agent and return once it is queued. Without task_slug a new task is
        created from the prompt (about ``repository``, if given; asked for by
        ``requested_by``). The agent sees the task's history before the prompt, and works in
        the task's workspace unless its role names a folder of its own; the files attached
        to the request are written there and named in its prompt (with those ``left_out``).
        LimitError when the task spent its budget or the drafting agent (``parent_id``) nests
        too deep, whoever asked."""
        role = self.role(role_name)
        if not prompt.strip():
            raise HarnessError("the prompt is empty", fix="say what the agent should do")
        return await self._dispatcher.draft(
            role,
            prompt,
            task_slug=task_slug,
            parent_id=parent_id,
            repository=repository,
            requested_by=requested_by,
            attachments=tuple(attachments),
            left_out=tuple(left_out),
        )

    async def run(
        self,
        role_name: str,
        prompt: str,
        *,
        task_slug: str | None = None,
        requested_by: str | None = None,
    ) -> DispatchRecord:
        handle = await self.draft(role_name, prompt, task_slug=task_slug, requested_by=requested_by)
        return await self.wait(handle.agent_id)

    async def keep_warm(self) -> None:
        """Keeps the spares config.yaml asks for (``spares``: one of the default role when
        it says nothing, in the workspace a new task gets by default or in named
        repositories' worktrees; ``followUpSpares`` for follow-ups) started ahead, so that
        requests start at once. For a long-lived front end (the bot); their CLIs end with
        the orchestrator."""
        templates = [
            (await self._runs.template(self.role(name)), count)
            for name, count in self._config.spare_counts.items()
        ]
        templates += [
            (await self._runs.template(self.role(name), repository), count)
            for (name, repository), count in self._config.repository_spare_counts.items()
        ]
        self._hosting.keep_warm(templates, follow_ups=self._config.follow_up_spares)

    async def start_ahead(self, role_name: str, repository: str | None = None) -> None:
        """Starts the CLI of the next new task's agent of ``role_name`` now (in a worktree
        of ``repository``, or where a new task goes by default), so that it starts while
        the task is made (``harness run``); it ends with the orchestrator if no dispatch
        takes it."""
        template = await self._runs.template(self.role(role_name), repository)
        self._hosting.start_ahead(template)

    async def wait(self, agent_id: str, timeout: float | None = None) -> DispatchRecord:
        """The agent's final record; waits while it runs. TimeoutError after ``timeout``."""
        final = await self._runs.wait(agent_id, timeout)
        return final if final is not None else await self.record(agent_id)

    async def record(self, agent_id: str) -> DispatchRecord:
        """The agent's current record, live or finished (a final record the store has not
        taken yet included)."""
        pending = await self._pending.record(agent_id)
        return pending if pending is not None else await self._store.record(agent_id)

    async def note_undelivered(self, task_slug: str, agent_id: str, reason: str) -> None:
        """Records on the agent's dispatch that its result could not be delivered, and why."""
        noted = await self._pending.amend(
            agent_id, lambda record: dataclasses.replace(record, undelivered=reason)
        )
        if noted is not None:
            return  # stored with its final record, still pending
        record = await self._store.record(agent_id)
        await self._store.save_dispatch(task_slug, dataclasses.replace(record, undelivered=reason))

    async def record_feedback(
        self, task_slug: str, agent_id: str, user: str, value: FeedbackValue
    ) -> DispatchRecord:
        """Keeps ``user``'s verdict on the agent's result on its dispatch (their latest one)."""
        verdict = Feedback(user, value, self.now())

        def with_verdict(record: DispatchRecord) -> DispatchRecord:
            kept = tuple(f for f in record.feedback if f.user != user)
            return dataclasses.replace(record, feedback=(*kept, verdict))

        pending = await self._pending.amend(agent_id, with_verdict)
        if pending is not None:  # stored with its final record, still pending
            return pending
        task = await self._store.get(task_slug)
        record = next((d for d in task.dispatches if d.agent_id == agent_id), None)
        if record is None:
            raise AgentNotFoundError(agent_id)
        record = with_verdict(record)
        await self._store.save_dispatch(task_slug, record)
        return record

    async def diff(self, task_slug: str, record: DispatchRecord) -> str | None:
        """The full diff of the task's workspace when the agent ended; None when it changed
        nothing or did not work in a git workspace."""
        if record.diff_file is None:
            return None
        return await self._store.read_text(task_slug, record.diff_file)

    def runtime_problem(self) -> str | None:
        """Why agents cannot be run now (e.g. the NATS server is away), or None: for a
        readiness check. A host in this process has none."""
        problem = getattr(self._hosting, "problem", None)
        return problem() if callable(problem) else None

    def agents(self) -> list[AgentInfo]:
        """Snapshots of the queued and running agents."""
        return self._pool.snapshot()

    def agent(self, agent_id: str) -> AgentInfo | None:
        """One live agent's snapshot; None once it has ended (see ``record``)."""
        return self._pool.info(agent_id)

    @property
    def roles(self) -> Mapping[str, Role]:
        return self._roles

    @property
    def metadata_fields(self) -> tuple[MetadataField, ...]:
        return self._metadata.fields

    async def collect_metadata(self, cwds: Iterable[Path]) -> dict[Path, dict[str, FieldValue]]:
        """The metadata fields of agents' folders (cached briefly, collected in parallel)."""
        return await self._metadata.collect_many(cwds)

    def agent_said(self, agent_id: str, since: int = 0) -> list[str]:
        """What a live agent has said (its texts, in order) from the ``since``-th on; [] once
        it has ended (its journal keeps everything)."""
        entry = self._pool.get(agent_id)
        return entry.said[since:] if entry is not None else []

    async def said(self, task_slug: str, record: DispatchRecord) -> list[str]:
        """Everything an agent said (its texts, in order), from its journal."""
        if not record.journal_file:
            return []
        entries = await self._store.read_jsonl(task_slug, record.journal_file)
        return [text for entry in entries for text in said_in(entry) if text]

    @contextlib.asynccontextmanager
    async def waiting(self, agent_id: str | None, activity: str) -> AsyncIterator[None]:
        """A live agent blocks on something other than its own work (an agent it drafted, a
        human): its slot serves the queue meanwhile, and its status says what it waits for."""
        entry = self._pool.get(agent_id) if agent_id else None
        if entry is None:
            yield
            return
        entry.control.activity = activity
        try:
            async with self._pool.lend_slot(entry):
                yield
        finally:
            entry.control.activity = "working"

    async def report_progress(
        self, agent_id: str, message: str, percent: float | None
    ) -> DispatchRecord:
        """Keep a live agent's progress in its record and tell the front ends."""
        return await self._runs.report_progress(self._live(agent_id), message, percent)

    async def kill(self, agent_id: str, reason: str, *, by: str | None = None) -> bool:
        """End a queued or running agent. False when it is not live. A person (``by``) must
        be the task's requester or an admin (NotAllowedError); None is the harness itself or
        an agent, whose tools decide."""
        entry = self._pool.get(agent_id)
        if by is not None and entry is not None:
            self._authority.check(by, entry.requester, f"stop agent {agent_id}")
        return await self._pool.kill(agent_id, reason)

    # -- life cycle ------------------------------------------------------------------------

    async def shutdown(
        self, reason: str = "the harness shut down", *, leave_remote_agents: bool = False
    ) -> None:
        """Stop every agent (dispatches end ``interrupted``), wait for their records, and
        close the store (every queued journal line on disk). No agent starts after this
        began; the store still answers reads. With ``leave_remote_agents`` (a server being
        restarted), agents running on workers go on, and the next start follows them."""
        self._dispatcher.closing = True
        if leave_remote_agents:
            await self._runs.leave_running_on_workers()
        await self._pool.kill_all(reason, interrupted=True)
        await self._runs.join()
        await self.close_pull_requests()
        await self._pending.close()  # what the store still refuses stays spooled
        await self._hosting.close()
        await self._store.close()

    async def recover_interrupted(self) -> list[tuple[str, DispatchRecord]]:
        """Mark dispatches that a crashed harness left queued/running as ``interrupted``, and
        kill the processes it left running; (task slug, record) of each marked. Agents that
        a worker still runs (a remote runtime) are followed to their end instead. Begins this
        process's run first, so its own dispatches are never taken for a dead one's. Final
        records a stopped process could not store are applied first (and those the store
        still refuses are retried): their dispatches ended, they were not interrupted."""
        await self._store.begin_run()
        finished = await self._pending.apply_spooled()
        return await recover_interrupted(
            self._store, self.now(), still_running=self._dispatcher.adopt, finished=finished
        )

    # -- internals -------------------------------------------------------------------------

    def _live(self, agent_id: str) -> PoolEntry:
        entry = self._pool.get(agent_id)
        if entry is None:
            raise AgentNotFoundError(agent_id)
        return entry
