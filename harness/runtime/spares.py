"""Spare agents: per template (a role as the orchestrator would start it for a new task), a
CLI started ahead in its OS sandbox and in a scratch folder (or a worktree of the
repository the template asks for, ``workspaces/spare_worktrees.py``) made ahead, connected
and waiting. A dispatch that fits one binds its identity and task and sends the prompt: the
start every agent pays (about 0.3 s) was paid before the request came.

One use each: a spare serves one dispatch and closes with it; it is replaced in the
background. Spares whose template is no longer wanted (a role file or the config changed)
are closed; so are all of them when their host closes. Their CLIs are guarded as any
agent's (they die with the harness), and each holds about 200 MB while it waits.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from harness.errors import HarnessError
from harness.runtime.spec import AgentControl, AgentSpec, RunIO, RunOutcome
from harness.workspaces.manager import SandboxFolders, SandboxGit, Workspace

logger = logging.getLogger(__name__)

SPARE_ID = "spare"
REFILL_DELAY = 1.0  # seconds
CLOSE_TIMEOUT = 10.0  # seconds


class WarmAgent(Protocol):
    """A runtime's agent started ahead for ``template``, waiting for its dispatch."""

    template: AgentSpec

    async def close(self) -> None: ...


@runtime_checkable
class WarmRuntime(Protocol):
    """A runtime that can start agents ahead. ``warm`` raises HarnessError when it cannot
    (dispatches then start cold)."""

    async def warm(self, template: AgentSpec) -> WarmAgent: ...

    async def run_warm(
        self, warm: Any, spec: AgentSpec, control: AgentControl, io: RunIO
    ) -> RunOutcome: ...


def _as_template(spec: AgentSpec) -> AgentSpec:
    return dataclasses.replace(
        spec, agent_id=SPARE_ID, prompt="", cwd="", task_slug="", attachments=(), cli_state=None
    )


def fits(template: AgentSpec, spec: AgentSpec) -> bool:
    """Whether an agent made for ``template`` is the agent ``spec`` asks for, but for who it
    is, its task, its prompt and its folder (pure)."""
    return _as_template(template) == _as_template(spec)


@dataclass
class Spare:
    view: Path  # its folder, at the path its agent is shown (``workspaces/views.py``)
    warm: WarmAgent


class SparePool:
    def __init__(self, runtime: WarmRuntime, folders: SandboxFolders) -> None:
        self._runtime = runtime
        self._folders = folders
        self._wanted: list[tuple[AgentSpec, int]] = []
        self._ready: list[Spare] = []
        self._making: dict[asyncio.Task[Spare | None], AgentSpec] = {}
        self._closing: set[asyncio.Task[None]] = set()
        self._failed: list[AgentSpec] = []  # templates whose spare could not be made
        self._closed = False
        self._changed = asyncio.Condition()
        self.served = 0  # dispatches a spare served (counted by its host)
        self._notes: set[asyncio.Future[None]] = set()
        self._claimed: set[asyncio.Task[Spare | None]] = set()  # each promised to a dispatch
        self._refill = True
        # A used spare's replacement starts this long after: a CLI starting takes about
        # 0.3 s of CPU, which would otherwise compete with the agent just given the spare
        # for its first turn (and, in a burst, with every other one).
        self.refill_delay = REFILL_DELAY

    def keep(self, templates: Sequence[tuple[AgentSpec, int]], *, refill: bool = True) -> None:
        """Keeps ``count`` spares of each template from now on; spares of templates no
        longer wanted are closed. ``refill`` false: a used spare is not replaced (a
        process that lives for one agent)."""
        self._wanted = [(_as_template(t), n) for t, n in templates if n > 0]
        self._refill = refill
        self._failed = []
        stale = [s for s in self._ready if not self._wants(s.warm.template)]
        self._ready = [s for s in self._ready if s not in stale]
        for spare in stale:
            self._spawn_close(spare)
        self._replenish()

    def _wants(self, template: AgentSpec) -> bool:
        return any(fits(t, template) for t, _ in self._wanted)

    async def take(self, spec: AgentSpec) -> Spare | None:
        """A spare that fits ``spec`` (its environment as placed), no longer a spare: a
        ready one, else one still starting that no other dispatch was promised (it is
        further along than a start now would be); None when there is neither, or when the
        one awaited could not be made."""
        for spare in self._ready:
            if fits(spare.warm.template, spec):
                self._ready.remove(spare)
                self._used()
                return spare
        for task, template in self._making.items():
            if task not in self._claimed and not task.done() and fits(template, spec):
                self._claimed.add(task)
                try:
                    await asyncio.wait({task})
                except asyncio.CancelledError:  # the dispatch ended first
                    self._claimed.discard(task)  # still starting: a spare for another
                    made = _made_spare(task)
                    if made is not None:  # handed over already: it goes
                        await _close_surely(made, self._folders)
                    raise
                made = _made_spare(task)
                if made is not None:
                    self._used()
                return made
        return None

    def _used(self) -> None:
        if not self._refill:
            return
        if self.refill_delay <= 0:
            self._replenish()
        else:
            asyncio.get_running_loop().call_later(self.refill_delay, self._replenish)

    def may_have(self, spec: AgentSpec) -> bool:
        """Whether ``take`` might find a spare for ``spec`` (cheap: no folder is looked at)."""
        if any(fits(s.warm.template, spec) for s in self._ready):
            return True
        return any(fits(t, spec) and task not in self._claimed for task, t in self._making.items())

    @property
    def ready(self) -> int:
        return len(self._ready)

    async def wait_ready(self, count: int, timeout: float) -> None:
        """Until ``count`` spares are ready (tests and benchmarks); TimeoutError after."""
        async with asyncio.timeout(timeout), self._changed:
            await self._changed.wait_for(lambda: len(self._ready) >= count)

    def _replenish(self) -> None:
        if self._closed:
            return
        for template, count in self._wanted:
            if any(fits(t, template) for t in self._failed):
                continue
            have = sum(fits(s.warm.template, template) for s in self._ready)
            have += sum(fits(t, template) for t in self._making.values())
            for _ in range(count - have):
                task = asyncio.create_task(self._make(template), name="spare agent")
                self._making[task] = template
                task.add_done_callback(self._made)

    def _made(self, task: asyncio.Task[Any]) -> None:
        self._making.pop(task, None)
        self._closing.discard(task)
        self._claimed.discard(task)
        if not task.cancelled() and task.exception() is not None:
            logger.error("making a spare agent failed", exc_info=task.exception())
        _announce(self._changed, self._notes)

    async def settled(self, timeout: float) -> None:
        """Until no spare is being made or closed (tests and benchmarks)."""
        async with asyncio.timeout(timeout), self._changed:
            await self._changed.wait_for(lambda: not self._making and not self._closing)

    async def _make(self, template: AgentSpec) -> Spare | None:
        """A new spare of ``template``: ready, or handed to the dispatch it was promised to
        (the return value); None when none could be made."""
        view = await _folder_for(template, self._folders)
        if view is None:  # no spare: dispatches start cold
            self._failed.append(template)
            return None
        try:
            warm = await self._runtime.warm(_in_folder(template, view, self._folders))
        except (HarnessError, OSError) as exc:  # no spare: dispatches start cold
            logger.warning("no spare %s agent: %s", template.role.name, exc)
            self._failed.append(template)
            await self._folders.drop_view(view)
            return None
        except BaseException:  # cancelled (the pool closes): its folder goes too
            await self._folders.drop_view(view)
            raise
        warm.template = template  # what it fits: the template as wanted, not its folder
        spare = Spare(view, warm)
        if asyncio.current_task() in self._claimed:
            return spare
        if self._closed or not self._wants(template):
            await _close_surely(spare, self._folders)
            return None
        self._ready.append(spare)  # no await before: a cancel now cannot lose it
        _announce(self._changed, self._notes)
        logger.info("a spare %s agent is ready", template.role.name)
        return None

    def _spawn_close(self, spare: Spare) -> None:
        task = asyncio.create_task(close_spare(spare, self._folders), name="closing a spare")
        self._closing.add(task)
        task.add_done_callback(self._made)

    async def close(self) -> None:
        """Closes every spare (their CLIs end) and stops making new ones. Those still
        starting are let finish and then closed: a sandbox ended while it starts can leave
        its inside running."""
        self._closed = True
        await asyncio.gather(*self._making, *self._closing, return_exceptions=True)
        ready, self._ready = self._ready, []
        closing = (close_spare(s, self._folders) for s in ready)
        await asyncio.gather(*closing, return_exceptions=True)


class FollowUpSpares:
    """A spare per recently active task, started in that task's folder or worktree, so that
    its next follow-up starts at once; at most ``limit``, the oldest giving way. Made after
    an agent of the task completed; one that no longer fits the follow-up is closed."""

    def __init__(
        self, runtime: WarmRuntime, folders: SandboxFolders, sandbox_git: SandboxGit
    ) -> None:
        self._runtime = runtime
        self._folders = folders
        self._sandbox_git = sandbox_git
        self.limit = 0
        self.served = 0  # follow-ups a spare served (counted by its host)
        self._by_task: dict[str, Spare] = {}  # oldest first
        self._making: set[asyncio.Task[None]] = set()
        # Task slug -> its spare starting, and the template it is made for.
        self._making_for: dict[str, tuple[asyncio.Task[None], AgentSpec]] = {}
        self._closed = False
        self._changed = asyncio.Condition()
        self._notes: set[asyncio.Future[None]] = set()

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
        task = asyncio.create_task(self._make(spec, folder, worktree), name="follow-up spare")
        self._making.add(task)
        self._making_for[slug] = (task, _as_template(spec))

        def made(task: asyncio.Task[None]) -> None:
            self._making.discard(task)
            if self._making_for.get(slug, (None,))[0] is task:
                del self._making_for[slug]

        task.add_done_callback(made)

    async def _make(self, spec: AgentSpec, folder: Path, worktree: Workspace | None) -> None:
        slug = spec.task_slug
        view = await self._folders.view(folder)
        template = _as_template(spec)
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
            await _close_surely(spare, self._folders)
            return
        # No await until it is stored: a cancel (the host closing) cannot lose it.
        gone = [old] if (old := self._by_task.pop(slug, None)) is not None else []
        self._by_task[slug] = spare
        while len(self._by_task) > self.limit:
            gone.append(self._by_task.pop(next(iter(self._by_task))))
        _announce(self._changed, self._notes)
        for each in gone:
            await _close_surely(each, self._folders)

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
        if fits(spare.warm.template, spec) and spare.view.exists():
            return spare
        await close_spare(spare, self._folders)
        return None

    async def close(self) -> None:
        self._closed = True  # those starting end once started (as in SparePool.close)
        await asyncio.gather(*self._making, return_exceptions=True)
        spares, self._by_task = list(self._by_task.values()), {}
        await asyncio.gather(
            *(close_spare(s, self._folders) for s in spares), return_exceptions=True
        )


async def close_spare(spare: Spare, folders: SandboxFolders) -> None:
    """Ends a spare: its CLI, and the path its folder is shown at. A CLI that does not end
    within CLOSE_TIMEOUT is left to the run-id sweep of the next start (``orphans.py``)
    rather than holding its host's shutdown."""
    try:
        async with asyncio.timeout(CLOSE_TIMEOUT):
            await spare.warm.close()
    except TimeoutError:
        logger.warning("a spare agent's CLI did not end within %s s", CLOSE_TIMEOUT)
    finally:
        await folders.drop_view(spare.view)


def _announce(changed: asyncio.Condition, notes: set[asyncio.Future[None]]) -> None:
    """Wakes whoever waits on ``changed``, soon: the caller need not await (and so cannot
    be cancelled between storing a spare and saying so)."""

    async def notify() -> None:
        async with changed:
            changed.notify_all()

    note = asyncio.ensure_future(notify())
    notes.add(note)  # kept until it ran
    note.add_done_callback(notes.discard)


async def _close_surely(spare: Spare, folders: SandboxFolders) -> None:
    """Ends a spare even when the caller is cancelled meanwhile (its CLI must not stay)."""
    await asyncio.shield(close_spare(spare, folders))


def _made_spare(task: asyncio.Task[Spare | None]) -> Spare | None:
    """The spare ``task`` made, if it is done and made one (not cancelled: the pool closed)."""
    if task.done() and not task.cancelled() and task.exception() is None:
        return task.result()
    return None


async def _folder_for(template: AgentSpec, folders: SandboxFolders) -> Path | None:
    """A folder made ahead for a spare of ``template``: a scratch folder, or a worktree of
    the repository it asks for; None (logged) when none can be made."""
    repository = template.workspace.repository if template.workspace is not None else None
    try:
        return await folders.spare_folder(repository, writes=template.role.writes)
    except (HarnessError, OSError) as exc:
        logger.warning("no spare %s agent: no folder for it: %s", template.role.name, exc)
        return None


def _in_folder(template: AgentSpec, view: Path, folders: SandboxFolders) -> AgentSpec:
    """``template`` placed in the spare's folder, with what its sandbox shows of its git."""
    placed = dataclasses.replace(template, cwd=str(view))
    git_view = folders.spare_git(view)
    if git_view is None:
        return placed
    return dataclasses.replace(placed, mounts=git_view.binds, mount_env=git_view.env)
