"""Spare agents: per template (a role as the orchestrator would start it for a new task), a
CLI started ahead in its OS sandbox and in a scratch folder (or a worktree of the
repository the template asks for, ``workspaces/spare_worktrees.py``) made ahead, connected
and waiting. A dispatch that fits one binds its identity and task and sends the prompt: the
start every agent pays (about 0.3 s) was paid before the request came.

One use each: a spare serves one dispatch and closes with it; it is replaced in the
background. Spares whose template is no longer wanted (a role file or the config changed)
are closed; so are all of them when their host closes. Their CLIs are guarded as any
agent's (they die with the harness), and each holds about 200 MB while it waits.

A spare never hurts the request it is given: it is checked when taken (its CLI running, its
folder as made, nothing there the CLI would load, ``spare_health.py``), and one that is not
is closed and the dispatch starts cold. Idle spares are watched: one whose CLI ends (the OOM
killer, a crash, an operator) is closed and replaced, later each time it happens again in a
row. Replacements wait while agents queue, and all spares keep within the host's caps
(``spare_budget.py``).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from harness.errors import HarnessError
from harness.retry import Backoff
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
from harness.workspaces.manager import SandboxFolders

logger = logging.getLogger(__name__)

REFILL_DELAY = 1.0  # seconds
# After the n-th spare in a row whose CLI died while it waited, its replacement waits this
# long: a spare that keeps dying (a broken CLI, memory short) does not spin.
DEATHS = Backoff(first=1.0, cap=300.0)


class SparePool:
    def __init__(
        self, runtime: WarmRuntime, folders: SandboxFolders, budget: SpareBudget | None = None
    ) -> None:
        self._runtime = runtime
        self._folders = folders
        self._budget = budget or SpareBudget()
        self._budget.add(self)
        self._wanted: list[tuple[AgentSpec, int]] = []
        self._ready: list[Spare] = []
        self._making: dict[asyncio.Task[Spare | None], AgentSpec] = {}
        self._closing: set[asyncio.Task[None]] = set()
        self._failed: list[AgentSpec] = []  # templates whose spare could not be made
        self._closed = False
        self._changed = asyncio.Condition()
        self.served = 0  # dispatches a spare served (counted by its host)
        self.died = 0  # spares whose CLI ended while they waited, or were found dead
        self.started = 0  # spares whose CLI was started
        self._deaths_in_row = 0  # since a spare last served: paces the replacements
        self._resting = False  # a replacement waits out its backoff
        self._refilling: asyncio.Task[None] | None = None
        self._notes: set[asyncio.Future[None]] = set()
        self._claimed: set[asyncio.Task[Spare | None]] = set()  # each promised to a dispatch
        self._refill = True
        self._spent = False
        self._settled = WhenSettled(self._budget, self._replenish)
        # A used spare's replacement starts this long after: a CLI starting takes about
        # 0.3 s of CPU, which would otherwise compete with the agent just given the spare
        # for its first turn (and, in a burst, with every other one).
        self.refill_delay = REFILL_DELAY

    def keep(self, templates: Sequence[tuple[AgentSpec, int]], *, refill: bool = True) -> None:
        """Keeps ``count`` spares of each template from now on; spares of templates no
        longer wanted are closed. ``refill`` false: a used spare is not replaced (a
        process that lives for one agent)."""
        self._wanted = [(as_template(t), n) for t, n in templates if n > 0]
        self._refill = refill
        self._spent = False
        self._failed = []
        stale = [s for s in self._ready if not self._wants(s.warm.template)]
        self._ready = [s for s in self._ready if s not in stale]
        for spare in stale:
            self._spawn_close(spare)
        self._replenish(trim=True)  # the caps may be new too

    def _wants(self, template: AgentSpec) -> bool:
        return any(fits(t, template) for t, _ in self._wanted)

    async def take(self, spec: AgentSpec) -> Spare | None:
        """A spare that fits ``spec`` (its environment as placed), no longer a spare: a
        ready one, else one still starting that no other dispatch was promised (it is
        further along than a start now would be); None when there is neither, or when the
        one awaited could not be made."""
        while spare := next((s for s in self._ready if fits(s.warm.template, spec)), None):
            self._ready.remove(spare)  # no other dispatch takes it while it is looked at
            if await self._usable(spare):
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
                        await close_surely(made, self._folders)
                    raise
                made = _made_spare(task)
                if made is None or not await self._usable(made):
                    return None
                self._used()
                return made
        return None

    async def _usable(self, spare: Spare) -> bool:
        """Whether a spare just taken can serve; one that cannot is closed (and replaced,
        but for one whose folder carries what its CLI would load: that is no place for a
        spare), as is any when the dispatch ends meanwhile."""
        try:
            state = await checked(spare.warm.pid, spare.view)
        except asyncio.CancelledError:
            await close_surely(spare, self._folders)
            raise
        if state == "ready":
            self._deaths_in_row = 0
            stop_watching(spare)
            return True
        logger.warning(
            "a spare %s agent could not serve (%s): closed, the request starts cold",
            spare.warm.template.role.name,
            {"dead": "its CLI had ended", "folder": "its folder went",
             "config": "its folder carries .claude"}[state],
        )  # fmt: skip
        if state == "config":
            self._failed.append(spare.warm.template)
        self._spawn_close(spare)
        if state == "dead":
            self._died()
        else:
            self._replenish()
        return False

    def _died(self) -> None:
        """A spare's CLI ended while it waited: its replacement waits longer each time in a
        row (``DEATHS``)."""
        self.died += 1
        self._deaths_in_row += 1
        delay = DEATHS.delay(self._deaths_in_row - 1)
        self._resting = True
        asyncio.get_running_loop().call_later(delay, self._rested)

    def _rested(self) -> None:
        self._resting = False
        self._replenish()

    async def _watch(self, spare: Spare) -> None:
        """Until the spare's CLI ends; if it is still waiting then, it is closed and
        replaced (a spare taken meanwhile is its dispatch's)."""
        await spare.warm.ended()
        if spare in self._ready:
            self._ready.remove(spare)
            logger.warning(
                "a spare %s agent's CLI ended while it waited: replacing it",
                spare.warm.template.role.name,
            )
            self._spawn_close(spare)
            self._died()
            announce(self._changed, self._notes)

    def _used(self) -> None:
        if not self._refill:
            self._spent = True  # started ahead for one dispatch: nothing replaces it
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

    async def wait_until(self, predicate: Callable[[], bool], timeout: float) -> None:
        """Until ``predicate()`` holds, tested whenever the pool changes (tests and
        benchmarks); TimeoutError after ``timeout``."""
        async with asyncio.timeout(timeout), self._changed:
            await self._changed.wait_for(predicate)

    @property
    def starting(self) -> int:
        """Spares being made (started, not yet ready)."""
        return len(self._making)

    def ready_pids(self) -> list[int | None]:
        """The CLI process of each ready spare (tests: a spare killed from outside)."""
        return [spare.warm.pid for spare in self._ready]

    def idle_count(self) -> int:
        return len(self._ready) + len(self._making)

    def idle_pids(self) -> list[tuple[int, int | None]]:
        return [(spare.order, spare.warm.pid) for spare in self._ready]

    def give_up(self, order: int) -> bool:
        spare = next((s for s in self._ready if s.order == order), None)
        if spare is None:
            return False
        self._ready.remove(spare)
        self._spawn_close(spare)
        return True

    def nudge(self) -> None:
        """The load changed (an agent started or ended): spares held back may start now,
        or once the queue has stayed empty for the settling time."""
        if not self._closed:
            self._settled.nudge()

    async def wait_ready(self, count: int, timeout: float) -> None:
        """Until ``count`` spares are ready (tests and benchmarks); TimeoutError after."""
        async with asyncio.timeout(timeout), self._changed:
            await self._changed.wait_for(lambda: len(self._ready) >= count)

    def _replenish(self, *, trim: bool = False) -> None:
        """Starts the spares missing, one at a time within the budget (in the background:
        the budget may measure memory); ``trim``: first closes idle spares over its cap."""
        if self._closed or self._spent:
            return
        if not trim and (self._resting or not self._missing()):
            return
        if self._refilling is None or self._refilling.done():
            task = asyncio.create_task(self._refill_spares(trim), name="spare agents")
            self._refilling = task
            task.add_done_callback(self._made)

    def _missing(self) -> list[AgentSpec]:
        missing: list[AgentSpec] = []
        for template, count in self._wanted:
            if any(fits(t, template) for t in self._failed):
                continue
            have = sum(fits(s.warm.template, template) for s in self._ready)
            have += sum(fits(t, template) for t in self._making.values())
            missing += [template] * (count - have)
        return missing

    async def _refill_spares(self, trim: bool) -> None:
        if trim:
            await self._budget.trim()
        while not self._closed and not self._resting and (missing := self._missing()):
            if not await self._budget.room():
                return  # held back: the next nudge (an agent's start or end) tries again
            if self._closed or self._resting or missing[0] not in self._missing():
                continue
            task = asyncio.create_task(self._make(missing[0]), name="spare agent")
            self._making[task] = missing[0]
            task.add_done_callback(self._made)

    def _made(self, task: asyncio.Task[Any]) -> None:
        self._making.pop(task, None)
        self._closing.discard(task)
        self._claimed.discard(task)
        if not task.cancelled() and task.exception() is not None:
            logger.error("making a spare agent failed", exc_info=task.exception())
        announce(self._changed, self._notes)

    async def settled(self, timeout: float) -> None:
        """Until no spare is being made or closed (tests and benchmarks)."""
        async with asyncio.timeout(timeout), self._changed:
            await self._changed.wait_for(
                lambda: not self._making and not self._closing and not self._refill_pending()
            )

    def _refill_pending(self) -> bool:
        return self._refilling is not None and not self._refilling.done()

    async def _make(self, template: AgentSpec) -> Spare | None:
        """A new spare of ``template``: ready, or handed to the dispatch it was promised to
        (the return value); None when none could be made."""
        view = await _folder_for(template, self._folders)
        if view is None:  # no spare: dispatches start cold
            self._failed.append(template)
            return None
        if await asyncio.to_thread(carries_cli_config, view):
            logger.info(
                "no spare %s agent: its worktree carries .claude (which its CLI would load "
                "once that changes); its requests start cold",
                template.role.name,
            )
            self._failed.append(template)
            await self._folders.drop_view(view)
            return None
        self.started += 1
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
            await close_surely(spare, self._folders)
            return None
        self._ready.append(spare)  # no await before: a cancel now cannot lose it
        spare.watch = asyncio.create_task(self._watch(spare), name="watching a spare")
        announce(self._changed, self._notes)
        logger.info("a spare %s agent is ready", template.role.name)
        await self._budget.trim()
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
        self._settled.cancel()
        if self._refilling is not None:
            await asyncio.gather(self._refilling, return_exceptions=True)
        await asyncio.gather(*self._making, *self._closing, return_exceptions=True)
        ready, self._ready = self._ready, []
        closing = (close_spare(s, self._folders) for s in ready)
        await asyncio.gather(*closing, return_exceptions=True)


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
