"""The orchestrator: the agents' lifecycle (draft, run, await, kill, list, subscribe), and
the one place where the core's services are built and wired.

Roles and routing pick who works, the dispatcher queues agents within the task's caps, the
runs carry them to their final records on the hosting, and the pool runs agents under a cap;
those parts are private. The services it builds are its attributes, for the front ends to use
directly: ``tasks`` (tasks, workspaces and records), ``humans`` (questions, answers and who
may decide), ``pull_requests``, ``accounts`` (linked GitHub accounts), ``files`` (files
agents share), ``metadata`` (the configured commands run in agents' folders) and ``memory``
(the team's notes per channel and repository, given to every agent there).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
from collections.abc import Callable, Mapping, Sequence

from harness.agents.account_links import AccountLinks
from harness.agents.authority import Authority
from harness.agents.dispatching import AgentHandle, Dispatcher
from harness.agents.events import AgentEvent, Events, Listener
from harness.agents.humans import Humans
from harness.agents.metadata import MetadataCollector
from harness.agents.pending_finals import PendingFinals
from harness.agents.pool import AgentInfo, AgentPool
from harness.agents.pull_requests import PullRequests
from harness.agents.recovery import AFTERCARE_FOLDER, Late, recover_interrupted
from harness.agents.runs import AgentRuns, LateOutcomes, ToolProvider
from harness.agents.services import Services
from harness.agents.shared_files import SharedFiles
from harness.agents.task_desk import TaskDesk
from harness.clock import SYSTEM, Clock, timestamp
from harness.config.roles import Role
from harness.config.routing import Router
from harness.config.settings import Config
from harness.errors import HarnessError, UnknownRoleError
from harness.forge.accounts import AccountStore
from harness.memory.service import team_memory
from harness.runtime.attachments import Attachment, LeftOut
from harness.runtime.spec import MODEL_API_RETRIES_ENV, Hosting, SpareLimits
from harness.tasks.common import PENDING_FOLDER
from harness.tasks.model import DispatchRecord, Task
from harness.tasks.store import Store
from harness.workspaces.manager import Workspaces

logger = logging.getLogger(__name__)

ToolProviderFactory = Callable[[Services], ToolProvider]


class Orchestrator:
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
        self._pool = AgentPool(config.mcp.max_concurrent_agents, clock)
        self._clock = clock
        self._authority = Authority(config.slack.admins)
        self._events = Events[AgentEvent]()
        self._shutting_down: asyncio.Future[None] | None = None
        child_env = {
            # MCP tools are offered directly, not behind ToolSearch.
            "ENABLE_TOOL_SEARCH": "false",
            # A long await_agent must not be cut off by the CLI's MCP timeout.
            "MCP_TOOL_TIMEOUT": str(config.mcp.tool_timeout_ms),
            # A failing model API: this many retries, each shown as the agent's progress.
            MODEL_API_RETRIES_ENV: str(config.model_api_retries),
            **(child_env or {}),
        }
        self.humans = Humans(
            store,
            self._pool,
            self._authority,
            clock,
            ask_timeout_seconds=config.ask_timeout_seconds,
        )
        # An agent that ends leaves no question open: its buttons close saying it ended.
        self._events.subscribe(
            lambda event: (
                self.humans.end_agent(event.record.agent_id) if event.kind == "finished" else None
            )
        )
        # One collector (and so one cache) for every front end and the tools.
        self.metadata = MetadataCollector(
            config.metadata, sandboxed=config.sandbox.enabled, clock=clock
        )
        self.files = SharedFiles(config, store, self._pool)
        # Final records the store refused (an unwritable task folder), retried until taken;
        # the task desk reads tasks with them, and the runs tell their end once stored.
        self._pending = PendingFinals(
            config.tasks_dir / PENDING_FOLDER,
            store,
            on_stored=lambda task, final: self._runs.stored_at_last(task, final),
        )
        self.tasks = TaskDesk(config, store, self._pool, workspaces, self._pending, clock)
        accounts = AccountStore(config.tasks_dir)
        self.accounts = AccountLinks(config, accounts, clock)
        # The team's notes per channel and repository (``harness/memory``), kept with the tasks.
        self.memory = team_memory(config, store, clock)
        self.pull_requests = PullRequests(
            config,
            store,
            self.tasks,
            self._authority,
            self._events,
            self.draft,
            accounts=accounts,
            clock=clock,
        )
        # What the harness tools reach: each service, and the agents' lifecycle.
        self.services = Services(
            self, self.tasks, self.humans, self.pull_requests, self.files, self.metadata
        )
        self._runs = AgentRuns(
            config,
            store,
            hosting,
            self._pool,
            self._events,
            tools=tools(self.services),
            pending=self._pending,
            child_env=child_env,
            clock=clock,
        )
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
            memory=self.memory,
        )

    # -- settings, roles, routing -----------------------------------------------------------

    @property
    def config(self) -> Config:
        return self._config

    @property
    def clock(self) -> Clock:
        """The harness's clock: front ends built over the orchestrator read time from it."""
        return self._clock

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
        budget_usd: float | None = None,
        model: str | None = None,
        plan: bool = False,
    ) -> AgentHandle:
        """Start an agent and return once it is queued. Without task_slug a new task is
        created from the prompt (about ``repository``, if given; asked for by
        ``requested_by``). The agent sees the task's history before the prompt, and works in
        the task's workspace unless its role names a folder of its own; the files attached
        to the request are written there and named in its prompt (with those ``left_out``).
        LimitError when the task spent its budget, a spend limit of who pays is reached
        (``SpendLimitError``) or the drafting agent (``parent_id``) nests too deep, whoever
        asked. ``budget_usd`` caps this agent below its role's own cap (a
        routine's ``budgetUsd``); the task's budget still holds. ``model``: one the role's
        ``models:`` allows (else HarnessError, nothing started); ``plan``: the agent works
        read-only and its result is a plan (``agents/directives.py``)."""
        role = self.role(role_name)
        if budget_usd is not None:
            cap = min(budget_usd, role.max_budget_usd or budget_usd)
            role = dataclasses.replace(role, max_budget_usd=cap)
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
            model=model,
            plan=plan,
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
        limits = SpareLimits(self._config.spares_max_idle, self._config.spares_max_memory_mb)
        self._hosting.keep_warm(
            templates,
            follow_ups=self._config.follow_up_spares,
            limits=limits,
            busy=self._pool.queued_for_slot,  # spares step aside while agents queue
        )

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

    def runtime_problem(self) -> str | None:
        """Why agents cannot be run now (e.g. the NATS server is away), or None: for a
        readiness check. A host in this process has none."""
        return self._hosting.problem()

    def agents(self) -> list[AgentInfo]:
        """Snapshots of the queued and running agents."""
        return self._pool.snapshot()

    def agent(self, agent_id: str) -> AgentInfo | None:
        """One live agent's snapshot; None once it has ended (see ``record``)."""
        return self._pool.info(agent_id)

    @property
    def roles(self) -> Mapping[str, Role]:
        return self._roles

    def agent_said(self, agent_id: str, since: int = 0) -> list[str]:
        """What a live agent has said (its texts, in order) from the ``since``-th on; [] once
        it has ended (its journal keeps everything)."""
        entry = self._pool.get(agent_id)
        return entry.said[since:] if entry is not None else []

    def waiting(
        self, agent_id: str | None, activity: str
    ) -> contextlib.AbstractAsyncContextManager[None]:
        """A live agent blocks on something other than its own work (an agent it drafted, a
        human): its slot serves the queue meanwhile, and its status says what it waits for."""
        return self._pool.waiting(agent_id, activity)

    async def report_progress(
        self, agent_id: str, message: str, percent: float | None
    ) -> DispatchRecord:
        """Keep a live agent's progress in its record and tell the front ends."""
        return await self._runs.report_progress(self._pool.live(agent_id), message, percent)

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
        restarted), agents running on workers go on, and the next start follows them.
        Calls after the first wait for it (a front end's own shutdown, then its opener's)."""
        if self._shutting_down is None:
            self._shutting_down = asyncio.ensure_future(self._shut(reason, leave_remote_agents))
        await asyncio.shield(self._shutting_down)

    async def _shut(self, reason: str, leave_remote_agents: bool) -> None:
        self._dispatcher.closing = True
        if leave_remote_agents:
            await self._runs.leave_running_on_workers()
        await self._pool.kill_all(reason, interrupted=True)
        await self._runs.join()
        await self.pull_requests.close()
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
        run_id = await self._store.begin_run()
        late: Late | None = None
        hosting = self._hosting
        if isinstance(hosting, LateOutcomes):  # what a stopped harness owed its workers
            folder = self._config.tasks_dir / AFTERCARE_FOLDER
            await hosting.resume_aftercare(folder, run_id, self._store.run_alive)

            async def late(slug: str, record: DispatchRecord) -> None:
                await hosting.await_late_outcome(slug, record.agent_id)

        finished = await self._pending.apply_spooled()
        return await recover_interrupted(
            self._store, self.now(), still_running=self._dispatcher.adopt, finished=finished,
            keep=self._pending.keep, late=late,
        )  # fmt: skip

    async def take_over_stopped_runs(self) -> tuple[list[tuple[str, DispatchRecord]], list[str]]:
        """``recover_interrupted`` for the runs that stopped since this process began (another
        bot replica's, on a shared store): (the dispatches marked interrupted, the agents a
        worker still runs, followed from here now). Called again and again by the one replica
        that holds the lease on it; what this process's own start took up is not taken again."""
        await self._store.begin_run()
        adopted: list[str] = []

        async def adopt(slug: str, record: DispatchRecord) -> bool:
            if self.agent(record.agent_id) is not None:  # taken over at an earlier call
                return True
            if not await self._dispatcher.adopt(slug, record):
                return False
            adopted.append(record.agent_id)
            return True

        marked = await recover_interrupted(
            self._store, self.now(), still_running=adopt, keep=self._pending.keep
        )
        return marked, adopted
