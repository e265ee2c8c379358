"""Agents' lives, from the queue to their final record.

Each registered agent waits for a slot in the pool, runs on its host (or, adopted, is
followed on the worker that still runs it), has what it says journalled, and ends with a
final record in the store: how it ended, its last progress and where its work is. Whoever
waits for an agent gets that record, even when storing it failed.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from harness.agents.ends import final_record, log_finish, with_work
from harness.agents.events import AgentEvent, Events
from harness.agents.hidden_files import harness_files as harness_files  # its old home
from harness.agents.pending_finals import PendingFinals
from harness.agents.pool import AgentPool, PoolEntry
from harness.agents.run_protocols import LateOutcomes as LateOutcomes
from harness.agents.run_protocols import ToolProvider as ToolProvider
from harness.clock import Clock, timestamp
from harness.config.roles import Role
from harness.config.settings import Config
from harness.errors import HarnessError, TaskNotFoundError
from harness.runtime.attachments import Attachment
from harness.runtime.host import workspace_request
from harness.runtime.orphans import RUN_ID_ENV
from harness.runtime.spec import (
    AgentSpec,
    Hosting,
    RunIO,
    RunOutcome,
    ToolUse,
)
from harness.tasks.common import upsert
from harness.tasks.journal import api_retry_in, said_in
from harness.tasks.model import DispatchRecord, Progress, Task
from harness.tasks.store import Store, diff_file_name
from harness.waits import within
from harness.workspaces.choice import default_repository
from harness.workspaces.manager import WorkReport, WorkspaceRequest

logger = logging.getLogger(__name__)


class AgentRuns:
    """The runs of the registered agents, and the final records they are waited on for."""

    def __init__(
        self,
        config: Config,
        store: Store,
        hosting: Hosting,
        pool: AgentPool,
        events: Events[AgentEvent],
        *,
        tools: ToolProvider,
        pending: PendingFinals,
        child_env: Mapping[str, str],
        clock: Clock,
    ) -> None:
        self._config = config
        self._store = store
        self._hosting = hosting
        self._pool = pool
        self._events = events
        self._tools = tools
        self._child_env = dict(child_env)
        self._clock = clock
        # Only live agents have a future; a finished agent is answered from the store.
        self._finished: dict[str, asyncio.Future[DispatchRecord]] = {}
        self._runs: set[asyncio.Task[None]] = set()
        # Agents left running on their workers at shutdown (hosts elsewhere).
        self._detached: set[str] = set()
        self._notes: set[asyncio.Future[DispatchRecord]] = set()  # progress being written
        self._marking: set[asyncio.Task[None]] = set()  # records being marked running
        self._placing: dict[str, asyncio.Event] = {}  # set once its host placed it
        # Final records the store refused (an unwritable task folder), retried until taken;
        # once one is in, ``stored_at_last`` tells its end.
        self.pending = pending
        self._told_finished: set[str] = set()  # pending ones whose end was told already
        if isinstance(hosting, LateOutcomes):
            hosting.on_late_outcome(self.late_outcome)

    def register(self, entry: PoolEntry) -> None:
        """A kill or a wait finds the agent from now on."""
        self._pool.register(entry)
        self._finished[entry.agent_id] = asyncio.get_running_loop().create_future()

    def unregister(self, entry: PoolEntry) -> None:
        """Forget an agent that never started (its dispatch could not be stored)."""
        self._pool.release(entry)
        self._finished.pop(entry.agent_id).cancel()

    def is_live(self, agent_id: str) -> bool:
        return agent_id in self._finished

    def start(
        self,
        entry: PoolEntry,
        role: Role,
        record: DispatchRecord,
        prompt: str,
        workspace: WorkspaceRequest | None,
        *,
        adopted_after: int | None = None,
        attachments: tuple[Attachment, ...] = (),
    ) -> None:
        """Run a registered agent in the background, its host making its ``workspace`` (None:
        a scratch folder, or the role's own). With ``adopted_after`` it is an agent a worker
        runs since before this process started (that many journal lines recorded): it is
        followed to its end rather than started. ``attachments``: the files attached to its
        request, for its host to write where it places it."""
        run = asyncio.create_task(
            self._run(entry, role, record, prompt, workspace, adopted_after, attachments),
            name=entry.agent_id,
        )
        self._runs.add(run)
        run.add_done_callback(self._runs.discard)

    async def wait(self, agent_id: str, timeout: float | None) -> DispatchRecord | None:
        """A live agent's final record, once it ends; None when it is not live."""
        done = self._finished.get(agent_id)
        if done is None:
            return None
        return await within(asyncio.shield(done), timeout)

    async def report_progress(
        self, entry: PoolEntry, message: str, percent: float | None
    ) -> DispatchRecord:
        """Keep a live agent's progress in its record and tell the front ends."""
        entry.progress = Progress(message=message, at=self._now(), percent=percent)
        entry.control.activity = message if percent is None else f"{message} ({percent:g}%)"
        async with entry.record_lock:
            # Reports may arrive together; whichever writes last writes the newest one. Once
            # the final record is being written, it carries the newest progress itself.
            record = await self._store.record(entry.agent_id)
            if entry.record_closed:
                return record
            record = dataclasses.replace(record, progress=entry.progress)
            task = await self._store.save_dispatch(entry.task_slug, record)
        self._events.emit(AgentEvent("progress", task, record))
        return record

    async def leave_running_on_workers(self) -> None:
        """Stop following the agents that run on workers; they go on, with no final record
        here (the next start adopts them). Agents still waiting for a slot are not touched."""
        if not self._hosting.agents_outlive_harness:
            return
        running = {a.agent_id for a in self._pool.snapshot() if a.status == "running"}
        self._detached |= running
        detached = [run for run in self._runs if run.get_name() in running]
        for run in detached:
            run.cancel()
        await asyncio.gather(*detached, return_exceptions=True)

    async def join(self) -> None:
        """Wait for every run to have ended (killed ones included)."""
        if self._runs:
            await asyncio.gather(*self._runs, return_exceptions=True)

    async def _run(
        self,
        entry: PoolEntry,
        role: Role,
        record: DispatchRecord,
        prompt: str,
        workspace: WorkspaceRequest | None,
        adopted_after: int | None,
        attachments: tuple[Attachment, ...],
    ) -> None:
        outcome: RunOutcome | None = None
        try:
            if await self._pool.acquire(entry):
                entry.state = "running"
                entry.started_at = record.started_at
                if adopted_after is None:
                    entry.started_at = self._now()
                    record = dataclasses.replace(
                        record, status="running", started_at=entry.started_at
                    )
                    await self._mark_running(entry, role, record)
                spec = self._spec(entry, role, prompt, workspace, record)
                spec = dataclasses.replace(spec, attachments=attachments)
                outcome = await self._run_on_host(spec, entry, record, adopted_after)
            else:
                outcome = RunOutcome(status="killed", error=entry.control.kill_reason)
        except Exception as exc:  # top of an agent's life: the record must still be written
            logger.exception("agent %s crashed in the harness", entry.agent_id)
            outcome = RunOutcome(status="failed", error=f"internal harness error: {exc}")
        finally:
            if entry.agent_id in self._detached:  # it goes on on its worker: no record yet
                self._pool.release(entry)
                self._finished.pop(entry.agent_id).cancel()
            else:
                await self._end(entry, record, outcome)

    async def _mark_running(self, entry: PoolEntry, role: Role, record: DispatchRecord) -> None:
        """Its record says ``running``, written once its host placed it, while its agent is
        given the prompt where agents end with this process: a crash meanwhile leaves its
        queued record (stored before its run began) for recovery to mark interrupted, and
        the run id there and in its CLI's environment gets the CLI killed. Its progress
        and final record wait for the lock."""
        await entry.record_lock.acquire()
        placed = self._placing[entry.agent_id] = asyncio.Event()
        marking = asyncio.create_task(self._write_running(entry, role, record, placed))
        if self._hosting.agents_outlive_harness:  # a restart follows only running ones
            placed.set()
            await marking
        self._marking.add(marking)
        marking.add_done_callback(self._marking.discard)

    async def _write_running(
        self, entry: PoolEntry, role: Role, record: DispatchRecord, placed: asyncio.Event
    ) -> None:
        try:
            await placed.wait()  # not while its spare is checked and its folder adopted
            task = await self._store.save_dispatch(entry.task_slug, record)
        except (HarnessError, OSError) as exc:
            if self._hosting.agents_outlive_harness:
                raise  # else its queued record stands until its final one replaces it
            logger.warning("agent %s: its record could not say running: %s", entry.agent_id, exc)
            return
        finally:
            self._placing.pop(entry.agent_id, None)
            entry.record_lock.release()
        logger.info("agent %s (%s) started on task %s", entry.agent_id, role.name, entry.task_slug)
        self._events.emit(AgentEvent("started", task, record))

    async def _run_on_host(
        self, spec: AgentSpec, entry: PoolEntry, record: DispatchRecord, adopted_after: int | None
    ) -> RunOutcome:
        journal = record.journal_file
        io = RunIO(
            self._tools,
            lambda message: self._on_message(entry, journal, message),
            lambda use: self._note_tool_use(entry, use),
            lambda cwd: self._placed(entry, cwd),
        )
        if adopted_after is None:
            return await self._hosting.run(spec, entry.control, io)
        return await self._hosting.adopt(spec, entry.control, io, seen_messages=adopted_after)

    async def _end(
        self, entry: PoolEntry, record: DispatchRecord, outcome: RunOutcome | None
    ) -> None:
        slug = entry.task_slug
        if (placing := self._placing.get(entry.agent_id)) is not None:
            placing.set()  # never placed (its workspace failed): its record says running now
        async with entry.record_lock:
            entry.record_closed = True
        final = final_record(
            record,
            outcome,
            progress=entry.progress,
            interrupted=entry.interrupted,
            kill_reason=entry.control.kill_reason,
            at=self._now(),
        )
        # Where its host really placed it (a worker's folder, say), once it was placed.
        final = dataclasses.replace(final, cwd=str(entry.cwd))
        unwritten: str | None = None
        try:
            # The host read the work while this agent still held the writer turn, so the
            # next writer's edits are never reported as this agent's.
            if outcome is not None and outcome.work is not None:
                final, unwritten = await self._with_work(slug, final, outcome.work)
        finally:
            self._pool.release(entry)
        await self._finish(slug, final, unwritten)

    async def _with_work(
        self, slug: str, record: DispatchRecord, work: WorkReport
    ) -> tuple[DispatchRecord, str | None]:
        """The record with where the agent's work is (its diff kept in the task folder), and
        the diff when the folder refused it (kept with the record until it takes it)."""
        if not work.diff:
            return with_work(record, work, None), None
        diff_file = diff_file_name(record.agent_id)
        try:
            await self._store.write_text(slug, diff_file, work.diff)
        except TaskNotFoundError:
            logger.warning("the task of agent %s is gone: its diff too", record.agent_id)
            return with_work(record, work, None), None
        except (HarnessError, OSError) as exc:
            logger.warning(
                "could not write the diff of agent %s (kept with its final record): %s",
                record.agent_id,
                exc,
            )
            return with_work(record, work, diff_file), work.diff
        return with_work(record, work, diff_file), None

    async def _finish(self, slug: str, final: DispatchRecord, unwritten: str | None) -> None:
        """Store the final record, then hand it to whoever waits. A record the store refuses
        is kept (spooled outside the task folder) and tried again until it is stored, before
        anyone is handed it: so what is shown of it is never lost, nor reported twice. So is
        one whose diff the folder refused (``unwritten``): stored once the diff is."""
        stored: Task | None = None
        try:
            if unwritten is not None:
                stored = await self._keep(slug, final, unwritten)
            else:
                stored = await self._store.save_dispatch(slug, final)
        except TaskNotFoundError:
            logger.exception("the task of agent %s is gone: its final record too", final.agent_id)
        except (HarnessError, OSError) as exc:
            logger.error(
                "could not store the final record of agent %s in task %s (kept, and tried "
                "again until it is stored): %s",
                final.agent_id,
                slug,
                exc,
            )
            stored = await self._keep(slug, final, None)
        finally:
            self._finished.pop(final.agent_id).set_result(final)
            log_finish(final, slug)
        if stored is not None:
            self._events.emit(AgentEvent("finished", stored, final))

    async def _keep(self, slug: str, final: DispatchRecord, diff: str | None) -> Task | None:
        """Keeps the record pending (``PendingFinals.keep``); the task as the store will hold
        it, whose end is told now."""
        await self.pending.keep(slug, final, diff=diff)
        try:
            stored = upsert(await self._store.get(slug), final)
        except (HarnessError, OSError):
            return None
        self._told_finished.add(final.agent_id)
        return stored

    async def late_outcome(self, slug: str, agent_id: str, outcome: RunOutcome) -> None:
        """The outcome of an agent recorded ``interrupted`` (its worker judged lost, or not
        found at a restart) that ended on its worker after all: it takes the interruption's
        place in the record, and is told as ``finished_late``; this returns once the
        listeners that are coroutines are done with it (what they owe is kept), so the
        outcome is awaited again after a stop before then. A record that holds that outcome
        already (stored by a start that stopped before it was told) is told again; any other
        is left as it is (ended otherwise)."""
        if self.is_live(agent_id):  # its interruption is being recorded: after it
            await self.wait(agent_id, None)
        record = await self._store.record(agent_id)
        if record.status != "interrupted":
            if record.status == outcome.status:
                await asyncio.gather(*self._events.emit(
                    AgentEvent("finished_late", await self._store.get(slug), record)))  # fmt: skip
            return
        final = final_record(
            record, outcome, progress=record.progress, interrupted=False, kill_reason=None,
            at=self._now(),
        )  # fmt: skip
        unwritten: str | None = None
        if outcome.work is not None:
            final, unwritten = await self._with_work(slug, final, outcome.work)
        task: Task | None
        if unwritten is not None:  # the folder refused the diff: kept with the record
            task = await self._keep(slug, final, unwritten)
        else:
            task = await self._store.save_dispatch(slug, final)
        log_finish(final, slug)
        if task is not None:
            await asyncio.gather(*self._events.emit(AgentEvent("finished_late", task, final)))

    def stored_at_last(self, task: Task, final: DispatchRecord) -> None:
        """A pending final record is in the store: its end is told, unless it was already."""
        if final.agent_id in self._told_finished:
            self._told_finished.discard(final.agent_id)
        else:
            self._events.emit(AgentEvent("finished", task, final))

    def _spec(
        self,
        entry: PoolEntry,
        role: Role,
        prompt: str,
        workspace: WorkspaceRequest | None,
        record: DispatchRecord,
    ) -> AgentSpec:
        # The run id reaches the CLI and every process it starts: whatever of them outlives
        # this process is found by it, and killed, at the next start.
        run = {RUN_ID_ENV: record.run_id} if record.run_id else {}
        if record.budget_usd is not None:  # its share of the task's budget caps its run
            role = dataclasses.replace(role, max_budget_usd=record.budget_usd)
        return AgentSpec(
            agent_id=entry.agent_id,
            role=role,
            prompt=prompt,
            cwd=str(entry.cwd),
            harness_tools=self._tools.declarations(role),
            env={**self._child_env, **run},
            task_slug=entry.task_slug,
            workspace=workspace,
            sandbox=self._config.sandbox,
            hidden=harness_files(self._config),
        )

    async def template(self, role: Role, repository: str | None = None) -> AgentSpec:
        """A spec of ``role`` as the first agent of a new task in ``repository`` would get
        it (None: in the workspace a new task gets by default, its default repository's
        worktree, else a scratch folder), but for who it is, its task and its prompt: what a
        spare is made for."""
        budget = self._config.mcp.task_budget_usd
        if budget is not None:  # a new task's whole budget is left
            cap = role.max_budget_usd
            allowance = budget if cap is None else min(cap, budget)
            role = dataclasses.replace(role, max_budget_usd=allowance)
        run_id = await self._store.begin_run()  # this process's run, as its dispatches'
        settings = self._config.workspaces
        return AgentSpec(
            agent_id="spare",
            role=role,
            prompt="",
            cwd="",
            harness_tools=self._tools.declarations(role),
            env={**self._child_env, **({RUN_ID_ENV: run_id} if run_id else {})},
            workspace=workspace_request(settings, repository or default_repository(settings)),
            sandbox=self._config.sandbox,
            hidden=harness_files(self._config),
        )

    def _placed(self, entry: PoolEntry, cwd: str) -> None:
        """Its host's folder for it: what its approvals judge paths by, and its record keeps."""
        if cwd:
            entry.cwd = Path(cwd)
        if (placing := self._placing.get(entry.agent_id)) is not None:
            placing.set()

    def _now(self) -> str:
        return timestamp(self._clock.now())

    def _on_message(self, entry: PoolEntry, journal: str, message: dict[str, Any]) -> None:
        if (placing := self._placing.get(entry.agent_id)) is not None:
            placing.set()  # at work, placed (a host that never said where, as a runtime alone)
        self._store.append_jsonl(entry.task_slug, journal, message)
        entry.said.extend(text for text in said_in(message) if text)
        retry = api_retry_in(message)
        if retry is not None:  # shown at once: the terminal, the Slack status
            note = asyncio.ensure_future(self.report_progress(entry, retry, None))
            self._notes.add(note)
            note.add_done_callback(self._notes.discard)

    async def _note_tool_use(self, entry: PoolEntry, use: ToolUse) -> None:
        entry.control.activity = f"using {use.name}"
