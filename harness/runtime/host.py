"""The agent host: where one agent run happens, from its serialisable spec to its work report.

A host places the agent's workspace from the spec's request (the role's own folder, the
task's git worktree, or a scratch folder), runs the agent on its runtime there, commits what a
writer left uncommitted on the task's branch, and returns the outcome with where the work is.

The same host serves every agent: in the harness's own process for a one-machine install
(``AgentHost`` is then what the orchestrator hands its agents to), and in each ``harness
worker`` for agents sent over NATS. The orchestrator only ever hands over a spec with a
workspace request; it never knows which kind of host runs it.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from harness.config.settings import RepositorySettings, WorkspaceSettings
from harness.errors import HarnessError
from harness.runtime.attachments import keep_out_of_git, write_attachments
from harness.runtime.follow_up_spares import FollowUpSpares
from harness.runtime.orphans import RUN_ID_ENV
from harness.runtime.spare_agent import Spare, WarmRuntime, close_spare
from harness.runtime.spare_budget import SpareBudget
from harness.runtime.spares import SparePool
from harness.runtime.spec import (
    AgentControl,
    AgentRuntime,
    AgentSpec,
    RunIO,
    RunOutcome,
    SpareLimits,
)
from harness.workspaces.files import remove_tree
from harness.workspaces.manager import (
    GitView,
    TamperedWorkspaceError,
    WorkReport,
    Workspace,
    WorkspaceRequest,
    Workspaces,
    commit_message,
    unknown_repository,
)
from harness.workspaces.spare_worktrees import renamed_branch_note

logger = logging.getLogger(__name__)


def workspace_request(
    settings: WorkspaceSettings, repository: str | None
) -> WorkspaceRequest | None:
    """The request for a task's git workspace in ``repository``; None for a scratch folder.
    A repository that is no longer configured is an error, not a silent scratch folder."""
    if repository is None:
        return None
    repo = settings.repositories.get(repository.lower())
    if repo is None:
        raise unknown_repository(repository, sorted(settings.repositories))
    return WorkspaceRequest(
        repository=repo.name,
        url=repo.url,
        path=str(repo.path) if repo.path else None,
        base_branch=repo.base_branch,
        commit_work=settings.commit_work,
    )


class AgentHost:
    """Runs agents on ``runtime`` in workspaces under ``workspaces``' root.

    ``run_id`` names the run that owns the agents' processes when it is this host's own (a
    worker's): the sender's run id means nothing on another machine, and the sender's restart
    must not sweep the agents away. None keeps the id the spec carries."""

    def __init__(
        self, runtime: AgentRuntime, workspaces: Workspaces, *, run_id: str | None = None
    ) -> None:
        self._runtime = runtime
        self._workspaces = workspaces
        self._sandbox_git = workspaces.sandbox_git
        self._folders = workspaces.sandbox_folders
        self._run_id = run_id
        # Agents started ahead, where the runtime can start them so (``spares.py``).
        self._spares: SparePool | None = None
        self._follow_ups: FollowUpSpares | None = None
        # Both pools' caps, and the load they give way to (``spare_budget.py``).
        self.spare_budget = SpareBudget()
        self.spares_dead_at_start = 0  # agents started anew: their spare's CLI had died
        if isinstance(runtime, WarmRuntime):
            self._spares = SparePool(runtime, self._folders, self.spare_budget)
            self._follow_ups = FollowUpSpares(
                runtime, self._folders, self._sandbox_git, self.spare_budget
            )

    def keep_warm(
        self,
        templates: Sequence[tuple[AgentSpec, int]],
        follow_ups: int = 0,
        *,
        limits: SpareLimits | None = None,
        busy: Callable[[], bool] | None = None,
    ) -> None:
        """Keeps spare agents of these templates (a count each) from now on, and one for
        the next follow-up of each of the ``follow_ups`` tasks last worked on, within
        ``limits``; none starts while ``busy()`` (agents queue for a slot)."""
        if self._spares is None or self._follow_ups is None:
            return
        self.spare_budget.set(limits, busy)
        self._follow_ups.limit = follow_ups
        if any(not t.sandbox.enabled for t, n in templates if n):
            logger.info("no spare agents: they run in the OS sandbox, which config turns off")
        kept = [(self._as_placed(t), n) for t, n in templates if t.sandbox.enabled]
        for template, _ in kept:
            if template.workspace is not None:  # a worker learns it from the templates
                self._know(template.workspace)
        self._spares.keep(kept)

    def start_ahead(self, template: AgentSpec) -> None:
        if self._spares is None or not template.sandbox.enabled:
            return
        if template.workspace is not None:
            self._know(template.workspace)
        self._spares.keep([(self._as_placed(template), 1)], refill=False)

    def _as_placed(self, spec: AgentSpec) -> AgentSpec:
        """The environment a new scratch task's agent gets here (``_place``)."""
        folder = Workspace(spec.task_slug or "_", self._workspaces.root / (spec.task_slug or "_"))
        return dataclasses.replace(spec, env={**spec.env, **self._run_env(), **folder.env})

    @property
    def spares(self) -> SparePool | None:
        return self._spares

    @property
    def follow_ups(self) -> FollowUpSpares | None:
        return self._follow_ups

    async def run(self, spec: AgentSpec, control: AgentControl, io: RunIO) -> RunOutcome:
        try:
            return await self._run(spec, control, io)
        finally:  # one agent fewer: spares held back while agents queued may start
            if self._spares is not None:
                self._spares.nudge()
            if self._follow_ups is not None:
                self._follow_ups.nudge()

    async def _run(self, spec: AgentSpec, control: AgentControl, io: RunIO) -> RunOutcome:
        try:
            spare, placed, workspace = await self._spare_for(spec)
            if placed is None:
                placed, workspace = await self._place(spec)
        except (HarnessError, OSError) as exc:  # a bad request or folder fails this run alone
            logger.warning("agent %s: no workspace: %s", spec.agent_id, exc)
            said = str(exc)
            if isinstance(exc, HarnessError):
                said = f"{exc.message}; {exc.fix}" if exc.fix else exc.message
            return RunOutcome(status="failed", error=f"could not make its workspace: {said}")
        io.on_placed(placed.cwd)
        try:
            # No thread's round trip without files: on a spare it delays the prompt.
            if spec.attachments:
                await asyncio.to_thread(write_attachments, Path(placed.cwd), spec.attachments)
        except (OSError, HarnessError) as exc:  # HarnessError: a name its agent made unwritable
            if spare is not None:
                await close_spare(spare, self._folders)
            return RunOutcome(status="failed", error=f"could not write its attached files: {exc}")
        try:
            # A follow-up's spare shows the view this fills; a spare worktree's own git
            # view came with it (its mounts).
            if not placed.mounts:
                placed = await self._show_git(placed, workspace)
        except HarnessError as exc:  # a tampered worktree: reported, not trusted
            if spare is not None:
                await close_spare(spare, self._folders)
            return RunOutcome(status="failed", error=f"{exc.message}; {exc.fix}")
        outcome = await self._run_placed(placed, control, io, spare)
        if outcome is None:  # its spare's CLI had died: it starts cold, as it would have
            self.spares_dead_at_start += 1
            try:
                bare = dataclasses.replace(placed, mounts=(), mount_env={})
                placed = await self._show_git(bare, workspace)
            except HarnessError as exc:
                return RunOutcome(status="failed", error=f"{exc.message}; {exc.fix}")
            outcome = await self._run_placed(placed, control, io, None)
            assert outcome is not None  # no spare: no such end
        if workspace is None:
            self._follow_up(spec, placed, outcome, None)
            return outcome
        try:
            if placed.mounts and spec.role.writes:
                await self._sandbox_git.settle_sandbox_view(workspace)
            work = await self._work(spec, workspace, outcome)
        except TamperedWorkspaceError as exc:  # said in the thread: its work is not trusted
            logger.warning("agent %s: %s", spec.agent_id, exc.message)
            return dataclasses.replace(outcome, status="failed", error=f"{exc.message}; {exc.fix}")
        except HarnessError as exc:  # what it committed in its sandbox could not be taken
            logger.warning("agent %s: %s", spec.agent_id, exc.message)
            error = f"its commits could not be brought out of its sandbox: {exc.message}"
            return dataclasses.replace(outcome, status="failed", error=error)
        self._follow_up(spec, placed, outcome, workspace)  # once its work is on the branch
        return dataclasses.replace(outcome, work=work)

    def _follow_up(
        self, spec: AgentSpec, placed: AgentSpec, outcome: RunOutcome, worktree: Workspace | None
    ) -> None:
        """After a completed agent: a spare for its task's next agent, which may then start
        at once."""
        if (
            self._follow_ups is not None
            and outcome.status == "completed"
            and self._may_view(placed)
        ):
            self._follow_ups.prepare(self._as_placed(spec), Path(placed.cwd), worktree)

    async def _run_placed(
        self, placed: AgentSpec, control: AgentControl, io: RunIO, spare: Spare | None
    ) -> RunOutcome | None:
        """Runs the placed agent, on its spare when it has one. A sandboxed agent in a
        task's workspace is shown it at a view path, as a spare is (``views.py``). None:
        the spare's CLI failed before it said anything (``_run_on_spare``)."""
        view = spare.view if spare is not None else await self._view_for(placed)
        shown = dataclasses.replace(placed, cwd=str(view)) if view is not None else placed
        state = self._workspaces.cli_state(placed.task_slug or "_", placed.agent_id)
        try:
            await asyncio.to_thread(state.mkdir, parents=True, exist_ok=True)
            shown = dataclasses.replace(shown, cli_state=str(state))
            if view is not None and spare is None and placed.mounts:  # its worktree's git too
                git_view = GitView(placed.mounts, placed.mount_env)
                moved = await self._folders.shown_in_view(git_view, placed.task_slug, view)
                shown = dataclasses.replace(shown, mounts=moved.binds, mount_env=moved.env)
            if spare is not None:
                return await self._run_on_spare(spare, shown, control, io)
            return await self._runtime.run(shown, control, io)
        finally:  # the journal keeps every message: the CLI's own copy goes
            await asyncio.to_thread(remove_tree, state)
            if view is not None:
                await self._folders.drop_view(view)

    async def _run_on_spare(
        self, spare: Spare, shown: AgentSpec, control: AgentControl, io: RunIO
    ) -> RunOutcome | None:
        """Runs on the spare; None when its CLI failed before it said anything (it died
        after it was checked: a kill is not instant), and the agent is then started cold
        (the person sees no error)."""
        assert isinstance(self._runtime, WarmRuntime)
        said: list[None] = []

        def on_message(message: dict[str, Any]) -> None:
            said.append(None)
            io.on_message(message)

        heard = dataclasses.replace(io, on_message=on_message)
        outcome = await self._runtime.run_warm(spare.warm, shown, control, heard)
        if outcome.status != "failed" or said or control.kill_requested:
            return outcome
        logger.warning(
            "agent %s: its spare's CLI failed before it answered (%s): starting it anew",
            shown.agent_id,
            outcome.error,
        )
        return None

    def _may_view(self, spec: AgentSpec) -> bool:
        """A sandboxed agent in its task's workspace (a scratch folder or a worktree), on a
        runtime that keeps spares."""
        return self._spares is not None and spec.sandbox.enabled and spec.role.cwd is None

    async def _view_for(self, placed: AgentSpec) -> Path | None:
        if not self._may_view(placed):
            return None
        return await self._folders.view(Path(placed.cwd))

    async def _spare_for(
        self, spec: AgentSpec
    ) -> tuple[Spare | None, AgentSpec | None, Workspace | None]:
        """A spare for the agent (the first of a new task, or a follow-up whose
        task's last agent left one), with the spec as placed in its folder (the task's) and
        the task's git workspace when it has one; (None, None, None) when none fits."""
        if self._spares is None or self._follow_ups is None or not self._may_view(spec):
            return None, None, None
        self._follow_ups.came(spec.task_slug)
        expected = self._as_placed(spec)
        if not self._spares.may_have(expected) and not self._follow_ups.has(spec.task_slug):
            return None, None, None  # none to look for: the cold path alone
        found = await self._workspaces.find(spec.task_slug)
        if found is not None:  # a follow-up: in the folder the task has
            spare = await self._follow_ups.take(expected)
            if spare is None:
                return None, None, None
            requested = spec.workspace.repository if spec.workspace is not None else None
            if not found.serves(requested):  # its repository vanished: the cold path says so
                await close_spare(spare, self._folders)
                return None, None, None
            self._follow_ups.served += 1
            placed = dataclasses.replace(expected, cwd=str(found.path))
            return spare, placed, found if found.base_commit is not None else None
        spare = await self._spares.take(expected)
        if spare is None:
            return None, None, None
        git_view = self._folders.spare_git(spare.view)  # what its sandbox shows of git
        try:
            workspace = await self._folders.adopt_spare(spare.view, spec.task_slug)
        except OSError as exc:  # its folder went (a prune while it waited): start cold
            logger.warning("spare for %s unusable: %s", spec.agent_id, exc)
            workspace = None
        if workspace is None:  # or the task's folder was made meanwhile by another agent
            await close_spare(spare, self._folders)
            return None, None, None
        self._spares.served += 1
        logger.info("agent %s starts on a spare, started ahead", spec.agent_id)
        placed = dataclasses.replace(expected, cwd=str(workspace.path))
        if git_view is None:
            return spare, placed, None
        if workspace.branch is not None:  # its CLI saw the placeholder's branch
            note = renamed_branch_note(spare.view, workspace.branch)
            placed = dataclasses.replace(placed, prompt=f"{placed.prompt}\n\n{note}")
        placed = dataclasses.replace(placed, mounts=git_view.binds, mount_env=git_view.env)
        return spare, placed, workspace

    def _run_env(self) -> dict[str, str]:
        return {RUN_ID_ENV: self._run_id} if self._run_id else {}

    async def _show_git(self, spec: AgentSpec, workspace: Workspace | None) -> AgentSpec:
        """The spec with what its sandbox shows of the worktree's git: a writer gets the
        task's own writable view (its branch, new objects); a reader, which may run beside
        one, the same folders read-only."""
        if workspace is None or not spec.sandbox.enabled:
            return spec
        view = await self._sandbox_git.sandbox_view(workspace, writes=spec.role.writes)
        if view is None:
            return spec
        return dataclasses.replace(spec, mounts=view.binds, mount_env=view.env)

    # Agents in this process: nothing to reach before they run, nothing that keeps them from
    # running, and they end with it (none is left to follow after a restart).

    async def connect(self) -> None:
        return None

    def problem(self) -> str | None:
        return None

    @property
    def agents_outlive_harness(self) -> bool:
        return False

    async def still_running(self, agent_id: str) -> bool:
        return False

    async def adopt(
        self, spec: AgentSpec, control: AgentControl, io: RunIO, *, seen_messages: int
    ) -> RunOutcome:
        raise HarnessError(
            f"agent {spec.agent_id} ran in a harness process that has stopped",
            fix="nothing outlives a local harness: ask again to run it anew",
        )

    async def close(self) -> None:
        if self._spares is not None:
            await self._spares.close()
        if self._follow_ups is not None:
            await self._follow_ups.close()

    async def _place(self, spec: AgentSpec) -> tuple[AgentSpec, Workspace | None]:
        """The spec with its working folder here: the role's own folder, else the task's git
        worktree or scratch folder; the workspace when it is a git one."""
        env = {**spec.env, **self._run_env()}
        if spec.role.cwd is not None:
            return dataclasses.replace(spec, cwd=str(spec.role.cwd), env=env), None
        request = spec.workspace
        if request is not None:
            self._know(request)
        workspace = await self._workspaces.prepare(
            spec.task_slug, request.repository if request else None
        )
        placed = dataclasses.replace(spec, cwd=str(workspace.path), env={**env, **workspace.env})
        return placed, workspace if workspace.base_commit is not None else None

    def _know(self, request: WorkspaceRequest) -> None:
        """Learns the requested repository: a worker knows none until a run names it; a
        repository this host has as requested keeps its own settings (its cache folder)."""
        known = self._workspaces.settings.repositories.get(request.repository.lower())
        path = request.path if not request.url else None
        if known is not None and (
            known.url,
            str(known.path) if known.path else None,
            known.base_branch,
        ) == (request.url, path, request.base_branch):
            return
        root = self._workspaces.root
        self._workspaces.add_repository(
            RepositorySettings(
                name=request.repository,
                path=Path(path) if path else None,
                url=request.url,
                cache=root / ".repos" / request.repository if request.url else None,
                base_branch=request.base_branch,
            )
        )

    async def _work(
        self, spec: AgentSpec, workspace: Workspace, outcome: RunOutcome
    ) -> WorkReport | None:
        """Where the agent's work is: a writer's work committed on the task's branch first."""
        request = spec.workspace
        message = None
        # Attached files stay out of the task's branch, even when the agent removed the
        # .gitignore that keeps them out.
        try:
            await asyncio.to_thread(keep_out_of_git, workspace.path)
        except (OSError, HarnessError) as exc:
            logger.warning("agent %s: attached files not kept out of git: %s", spec.agent_id, exc)
        if spec.role.writes and (request is None or request.commit_work):
            summary = outcome.result.summary if outcome.result else None
            message = commit_message(
                workspace.slug, spec.role.name, spec.agent_id, outcome.status, summary
            )
        try:
            return await self._workspaces.report(
                workspace, commit=message, author=f"harness {spec.role.name}"
            )
        except TamperedWorkspaceError:
            raise
        except (HarnessError, OSError) as exc:
            logger.warning("could not read the changes in %s: %s", workspace.path, exc)
            return None
