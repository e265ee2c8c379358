"""Follow-up spares: a spare per recently active task, started in that task's folder or
worktree after one of its agents completed, so that its next follow-up starts at once (the
pool of new tasks' spares is ``spares.py``, whose checks these share)."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from pathlib import Path

from harness.errors import HarnessError
from harness.runtime.spare_agent import (
    Spare,
    WarmRuntime,
    announce,
    as_template,
    close_spare,
    close_surely,
    fits,
    stop_watching,
)
from harness.runtime.spare_budget import SpareBudget, WhenSettled
from harness.runtime.spare_health import carries_cli_config, checked
from harness.runtime.spec import AgentSpec
from harness.workspaces.manager import SandboxFolders, SandboxGit, Workspace

logger = logging.getLogger(__name__)


class FollowUpSpares:
    """A spare per recently active task, started in that task's folder or worktree, so that
    its next follow-up starts at once; at most ``limit``, the oldest giving way. Made after
    an agent of the task completed, or, when agents queued then (``SpareBudget``), once the
    load has settled, for the tasks last completed; never when the folder carries what the
    CLI would load. One that no longer fits the follow-up, or whose CLI ended, is closed (a
    follow-up's spare is not replaced: it was for one moment)."""

    def __init__(
        self,
        runtime: WarmRuntime,
        folders: SandboxFolders,
        sandbox_git: SandboxGit,
        budget: SpareBudget | None = None,
    ) -> None:
        self._runtime = runtime
        self._folders = folders
        self._sandbox_git = sandbox_git
        self._budget = budget or SpareBudget()
        self._budget.add(self)
        self.limit = 0
        self.served = 0  # follow-ups a spare served (counted by its host)
        self.started = 0  # spares whose CLI was started
        self.died = 0  # spares whose CLI ended while they waited, or were found dead
        self._by_task: dict[str, Spare] = {}  # oldest first
        self._making: set[asyncio.Task[None]] = set()
        # Task slug -> its spare starting, and the template it is made for.
        self._making_for: dict[str, tuple[asyncio.Task[None], AgentSpec]] = {}
        self._closed = False
        self._changed = asyncio.Condition()
        self._notes: set[asyncio.Future[None]] = set()
        # Tasks whose agent completed while agents queued, newest last: their spares start
        # once the load settles (a burst's tail would otherwise get none).
        self._put_off: dict[str, tuple[AgentSpec, Path, Workspace | None]] = {}
        self._settled = WhenSettled(self._budget, self._start_put_off)

    def idle_count(self) -> int:
        return len(self._by_task) + len(self._making_for)

    def idle_pids(self) -> list[tuple[int, int | None]]:
        return [(spare.order, spare.warm.pid) for spare in self._by_task.values()]

    def give_up(self, order: int) -> bool:
        slug = next((k for k, s in self._by_task.items() if s.order == order), None)
        if slug is None:
            return False
        self._spawn_close(self._by_task.pop(slug))
        return True

    def ready_pids(self) -> dict[str, int | None]:
        """Each waiting spare's task and CLI process (tests: a spare killed from outside)."""
        return {slug: spare.warm.pid for slug, spare in self._by_task.items()}

    def _spawn_close(self, spare: Spare) -> None:
        task = asyncio.create_task(close_spare(spare, self._folders), name="closing a spare")
        self._making.add(task)
        task.add_done_callback(self._making.discard)

    async def settled(self, timeout: float) -> None:
        """Until no follow-up spare is being made or closed (tests and benchmarks)."""
        async with asyncio.timeout(timeout):
            while self._making:
                await asyncio.wait(set(self._making))

    def has(self, slug: str) -> bool:
        """Whether task ``slug`` has a spare, ready or starting."""
        return slug in self._by_task or slug in self._making_for

    async def wait_for(self, slug: str, timeout: float) -> None:
        """Until task ``slug`` has a follow-up spare (tests and benchmarks)."""
        async with asyncio.timeout(timeout), self._changed:
            await self._changed.wait_for(lambda: slug in self._by_task)

    def prepare(self, spec: AgentSpec, folder: Path, worktree: Workspace | None = None) -> None:
        """After an agent of ``spec``'s task: a spare for the task's next agent, in the
        task's ``folder`` (its ``worktree``, whose git the spare's sandbox shows as the next
        run's will: the view is filled at dispatch, ``SandboxGit.sandbox_view``)."""
        if self.limit <= 0 or self._closed:
            return
        slug = spec.task_slug
        self._put_off.pop(slug, None)
        if not self._budget.quiet(counted=0):  # a start now would cost the agents queued
            self._put_off[slug] = (spec, folder, worktree)
            while len(self._put_off) > self.limit:
                del self._put_off[next(iter(self._put_off))]
            return
        # At most ``limit`` at once, those starting included: the oldest gives way first.
        if (old := self._by_task.pop(slug, None)) is not None:
            self._spawn_close(old)
        while self._by_task and len(self._by_task) + len(self._making_for) >= self.limit:
            self._spawn_close(self._by_task.pop(next(iter(self._by_task))))
        if slug in self._making_for or len(self._making_for) >= self.limit:
            return  # one is starting for it already, or as many as may for other tasks
        task = asyncio.create_task(self._make(spec, folder, worktree), name="follow-up spare")
        self._making.add(task)
        self._making_for[slug] = (task, as_template(spec))

        def made(task: asyncio.Task[None]) -> None:
            self._making.discard(task)
            if self._making_for.get(slug, (None,))[0] is task:
                del self._making_for[slug]

        task.add_done_callback(made)

    def nudge(self) -> None:
        """The load changed (an agent started or ended): the spares put off while agents
        queued start once it has settled."""
        if self._put_off and not self._closed:
            self._settled.nudge()

    def came(self, slug: str) -> None:
        """An agent of task ``slug`` starts: a spare put off for its follow-up is not made
        (its end asks for one again)."""
        self._put_off.pop(slug, None)

    def _start_put_off(self) -> None:
        put_off, self._put_off = list(self._put_off.values()), {}
        for spec, folder, worktree in put_off:  # the newest last: it outlasts the others
            self.prepare(spec, folder, worktree)

    async def _make(self, spec: AgentSpec, folder: Path, worktree: Workspace | None) -> None:
        slug = spec.task_slug
        if not await self._budget.room(counted=1):  # this one is counted as starting
            return
        if await asyncio.to_thread(carries_cli_config, folder):
            logger.info("no follow-up spare for %s: its folder carries .claude", slug)
            return
        view = await self._folders.view(folder)
        template = as_template(spec)
        self.started += 1
        try:
            placed = dataclasses.replace(spec, cwd=str(view))
            if worktree is not None:
                placed = await self._with_git(placed, worktree, view)
            warm = await self._runtime.warm(placed)
        except (HarnessError, OSError) as exc:
            logger.info("no follow-up spare for %s: %s", slug, exc)
            await self._folders.drop_view(view)
            return
        except BaseException:  # cancelled (the host closes): its view goes too
            await self._folders.drop_view(view)
            raise
        warm.template = template
        spare = Spare(view, warm)
        if self._closed:
            await close_surely(spare, self._folders)
            return
        # No await until it is stored: a cancel (the host closing) cannot lose it.
        gone = [old] if (old := self._by_task.pop(slug, None)) is not None else []
        self._by_task[slug] = spare
        spare.watch = asyncio.create_task(self._watch(slug, spare), name="watching a spare")
        while len(self._by_task) > self.limit:
            gone.append(self._by_task.pop(next(iter(self._by_task))))
        announce(self._changed, self._notes)
        logger.info("a follow-up spare for %s is ready", slug)
        for each in gone:
            await close_surely(each, self._folders)
        await self._budget.trim()

    async def _watch(self, slug: str, spare: Spare) -> None:
        """Until the spare's CLI ends; if it still waits then, it is closed."""
        await spare.warm.ended()
        if self._by_task.get(slug) is spare:
            del self._by_task[slug]
            self.died += 1
            logger.warning("the follow-up spare of %s: its CLI ended while it waited", slug)
            self._spawn_close(spare)

    async def _with_git(self, spec: AgentSpec, worktree: Workspace, view: Path) -> AgentSpec:
        ahead = await self._sandbox_git.sandbox_view_ahead(worktree, writes=spec.role.writes)
        if ahead is None:
            return spec
        shown = await self._folders.shown_in_view(ahead, worktree.slug, view)
        return dataclasses.replace(spec, mounts=shown.binds, mount_env=shown.env)

    async def take(self, spec: AgentSpec) -> Spare | None:
        """The spare of ``spec``'s task when it fits ``spec`` (as placed), else None. One
        still starting is waited for: it is further along than a start now would be (a
        coordinator drafts its next agent as soon as the last one's result is in)."""
        making = self._making_for.get(spec.task_slug)
        if making is not None and fits(making[1], spec):
            await asyncio.wait({making[0]})
        spare = self._by_task.pop(spec.task_slug, None)
        if spare is None:
            return None
        if fits(spare.warm.template, spec):
            try:
                state = await checked(spare.warm.pid, spare.view, link=True)
            except asyncio.CancelledError:  # the dispatch ended: the spare goes with it
                await close_surely(spare, self._folders)
                raise
            if state == "ready":
                stop_watching(spare)
                return spare
            self.died += state == "dead"
            logger.warning("the follow-up spare of %s could not serve (%s): closed, the "
                           "follow-up starts cold", spec.task_slug, state)  # fmt: skip
        await close_spare(spare, self._folders)
        return None

    async def close(self) -> None:
        self._closed = True  # those starting end once started (as in SparePool.close)
        self._settled.cancel()
        self._put_off = {}
        await asyncio.gather(*self._making, return_exceptions=True)
        spares, self._by_task = list(self._by_task.values()), {}
        await asyncio.gather(
            *(close_spare(s, self._folders) for s in spares), return_exceptions=True
        )
