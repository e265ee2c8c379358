"""Putting agents in the queue: a new dispatch, or one a worker still runs after a restart.

A new dispatch is checked against the task's caps whoever asks for it (its budget; how deep
agents draft agents) and the spend limits of who pays for it (``spend_gate.py``), gets a
fresh agent id (never one the store has seen), a queued record and a workspace request for
its host, and is handed to the runs. After a restart, an agent a worker still runs is
registered again and followed to its end.
"""

from __future__ import annotations

import dataclasses
import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from harness.agents.directives import for_request, plan_prompt
from harness.agents.events import AgentEvent, Events
from harness.agents.pool import AgentPool, PoolEntry
from harness.agents.runs import AgentRuns
from harness.agents.spend_gate import SpendGate
from harness.clock import Clock, timestamp
from harness.config.roles import Role
from harness.config.settings import Config
from harness.errors import HarnessError, LimitError
from harness.memory.service import TeamMemory
from harness.runtime.attachments import Attachment, LeftOut, attachment_note, with_note
from harness.runtime.host import workspace_request
from harness.runtime.spec import Hosting
from harness.tasks.context import compose_prompt
from harness.tasks.model import FINAL_STATUSES, DispatchRecord, Task
from harness.tasks.store import Store, journal_file_name
from harness.workspaces.manager import task_branch

logger = logging.getLogger(__name__)

# 40 random bits: ids stay short enough to type in Slack; each is also checked against the
# store, so an id is never reused, across restarts too.
_AGENT_ID_BYTES = 5


@dataclass(frozen=True)
class AgentHandle:
    agent_id: str
    role: str
    task_slug: str


class Dispatcher:
    def __init__(
        self,
        config: Config,
        roles: Mapping[str, Role],
        store: Store,
        hosting: Hosting,
        pool: AgentPool,
        runs: AgentRuns,
        events: Events[AgentEvent],
        *,
        clock: Clock,
        simulated_costs: bool,
        memory: TeamMemory | None = None,
    ) -> None:
        self._config = config
        self._memory = memory  # the team's notes, given to every agent of their scope
        self._roles = roles
        self._store = store
        self._hosting = hosting
        self._pool = pool
        self._runs = runs
        self._events = events
        self._clock = clock
        # Agents talk to a scripted model: their records say the costs were not paid.
        self._simulated_costs = simulated_costs
        self._spend = SpendGate(config.limits, store, clock, simulated=simulated_costs)
        self.closing = False  # set by the shutdown: no agent starts after that

    async def draft(
        self,
        role: Role,
        prompt: str,
        *,
        task_slug: str | None,
        parent_id: str | None,
        repository: str | None,
        requested_by: str | None,
        attachments: tuple[Attachment, ...] = (),
        left_out: tuple[LeftOut, ...] = (),
        model: str | None = None,
        plan: bool = False,
    ) -> AgentHandle:
        """See ``Orchestrator.draft``."""
        self.refuse_when_closing()
        role = for_request(role, model=model, plan=plan)  # a model it does not allow: refused
        # Kept with the dispatch's prompt: later agents of the task read where the files are.
        prompt = with_note(prompt, attachment_note(attachments, left_out))
        parent = self._pool.get(parent_id) if parent_id else None
        depth = parent.depth + 1 if parent else 1
        task = await (
            self._store.get(task_slug)
            if task_slug
            else self._store.create(prompt, repository=repository, requester=requested_by)
        )
        # Counted as the harness says it: an agent whose final record the store has not
        # taken yet (``pending``) has ended, its cost spent and its allowance no longer held.
        allowance = self._check_limits(await self._runs.pending.overlay(task), depth, role)
        # Only the task's thread's channel's and repository's notes: never another channel's.
        notes = await self._memory.for_task(task) if self._memory is not None else ()
        # Whoever hosts the agent makes its workspace from the request, where it runs; a
        # role with a folder of its own works there.
        request = workspace_request(self._config.workspaces, task.repository)
        cwd = role.cwd if role.cwd is not None else self._config.workspaces.root / task.slug
        agent_id = await self._new_agent_id()
        run_id = await self._store.begin_run()  # this process's run: held until it ends
        record = DispatchRecord(
            agent_id=agent_id,
            role=role.name,
            cwd=str(cwd),
            model=role.model,
            started_at=timestamp(self._clock.now()),
            status="queued",
            journal_file=journal_file_name(agent_id),
            prompt=prompt,
            parent_id=parent_id,
            host_pid=os.getpid(),
            run_id=run_id,
            branch=task_branch(task.slug) if request and role.cwd is None else None,
            budget_usd=allowance,
            cost_simulated=self._simulated_costs,
            requested_by=requested_by,
            plan=plan,
        )
        entry = PoolEntry(
            agent_id=agent_id,
            role=role.name,
            task_slug=task.slug,
            cwd=cwd,
            parent_id=parent_id,
            depth=depth,
            queued_at=record.started_at,
            writes=role.writes,
            requester=task.requester,
        )
        spending = await self._spend.spending(task)
        # Checked again and registered with no await in between: shutdown stops every
        # registered agent, and none registers after it began. A kill or a wait finds it now.
        # So are the spend limits, with the allowance reserved: agents at once cannot pass them.
        self.refuse_when_closing()
        record = dataclasses.replace(record, budget_usd=self._spend.reserve(spending, task, record))
        self._runs.register(entry)
        try:
            task = await self._store.save_dispatch(task.slug, record)
        except BaseException:
            self._runs.unregister(entry)
            self._spend.forget(agent_id)
            raise
        self._spend.saved(agent_id)
        full_prompt = compose_prompt(
            task, prompt, budget_chars=self._config.context_budget_chars, notes=notes
        )
        full_prompt = plan_prompt(full_prompt) if plan else full_prompt
        self._runs.start(entry, role, record, full_prompt, request, attachments=attachments)
        self._events.emit(AgentEvent("queued", task, record))
        return AgentHandle(agent_id=agent_id, role=role.name, task_slug=task.slug)

    async def adopt(self, slug: str, record: DispatchRecord) -> bool:
        """Follows an agent of a stopped harness that a worker still runs; False when none
        does (or its host is this process, where none outlives it)."""
        if record.role not in self._roles:
            return False
        if not await self._hosting.still_running(record.agent_id):
            return False
        # Followed by this process's run from now: should it stop too, the next taker finds
        # that run ended and takes the agent up again (a store that takes no writes now
        # keeps the old run: the claim on it still holds while this process lives).
        ours = dataclasses.replace(record, run_id=await self._store.begin_run())
        try:
            await self._store.save_dispatch(slug, ours)
            record = ours
        except (HarnessError, OSError) as exc:
            logger.warning("agent %s: its record could not name this run: %s", record.agent_id, exc)
        # As it was drafted: the model its request picked, read-only when it plans.
        role = for_request(self._roles[record.role], plan=record.plan)
        role = dataclasses.replace(role, model=record.model)
        seen = len(await self._store.read_jsonl(slug, record.journal_file))
        task = await self._store.get(slug)
        entry = PoolEntry(
            agent_id=record.agent_id,
            role=role.name,
            task_slug=slug,
            cwd=Path(record.cwd),
            parent_id=record.parent_id,
            depth=1 if record.parent_id is None else 2,
            queued_at=record.started_at,
            writes=role.writes,
            requester=task.requester,
        )
        self._runs.register(entry)
        # Followed, not placed: its workspace is where its host made it.
        self._runs.start(entry, role, record, record.prompt, None, adopted_after=seen)
        logger.info("agent %s (%s) of task %s: followed again on its worker", record.agent_id,
                    role.name, slug)  # fmt: skip
        return True

    def refuse_when_closing(self) -> None:
        if self.closing:
            raise HarnessError(
                "the harness is shutting down, so no agent starts", fix="ask again once it is back"
            )

    def _check_limits(self, task: Task, depth: int, role: Role) -> float | None:
        """The task's caps, for every dispatch: how deep agents draft, and its budget. The
        agent's allowance: the role's maxBudgetUsd within what the budget has left once the
        task's spending and its live agents' allowances are counted (None: no cap)."""
        settings = self._config.mcp
        if depth > settings.max_depth:
            raise LimitError(
                "DEPTH_LIMIT_EXCEEDED",
                f"agents may draft agents at most {settings.max_depth} levels deep; this agent "
                f"would be level {depth}",
                fix="do this part of the work in the drafting agent, or raise mcp.maxDepth in "
                "config.yaml",
            )
        budget = settings.task_budget_usd
        if budget is None:
            return role.max_budget_usd
        spent = sum(d.cost_usd or 0.0 for d in task.dispatches)
        live = [d for d in task.dispatches if d.status not in FINAL_STATUSES]
        reserved = sum(d.budget_usd or 0.0 for d in live)
        left = budget - spent - reserved
        if left <= 0:
            held = f" and its {len(live)} live agent(s) may spend ${reserved:.2f}" if live else ""
            raise LimitError(
                "BUDGET_EXCEEDED",
                f"task {task.slug} has spent ${spent:.4f}{held} of its ${budget:.2f} budget",
                fix="start a new task (a new thread) for more work, or ask an admin to raise "
                "mcp.taskBudgetUsd in config.yaml",
            )
        return left if role.max_budget_usd is None else min(role.max_budget_usd, left)

    async def _new_agent_id(self) -> str:
        while True:
            agent_id = "a" + self._clock.token(_AGENT_ID_BYTES)
            if not self._runs.is_live(agent_id) and not await self._store.knows_agent(agent_id):
                return agent_id
