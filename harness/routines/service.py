"""The routines' scheduler: fires each due schedule slot once, takes the firings of the other
triggers (a GitHub event, an HTTP call, `harness routines run`), and records what each run did.

A firing starts a task only when the ledger lets it claim its key (so once, across restarts
and bot processes), the routine is not paused, and its overlap rule allows it (``skip``: not
while its last run works; ``queue``: after it). A slot missed while nobody watched runs once
at start when it is within ``catchUp``, and is recorded skipped otherwise. After
``disableAfterFailures`` failed runs in a row the routine pauses itself and its launcher tells
its owner and channel why. The front end supplies the launcher (how a task starts where its
people see it); time is the injected clock's.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Protocol

from harness.clock import Clock, timestamp
from harness.config.routines_schema import Routine
from harness.errors import HarnessError
from harness.metrics import Metrics
from harness.routines.ledger import FiringLedger
from harness.routines.model import (
    Firing,
    LaunchedRun,
    Pause,
    RoutineError,
    RoutineState,
    RunOutcome,
    RunRecord,
    Skip,
)
from harness.routines.schedule import ON_TIME, due
from harness.routines.state import RoutineStates, RunAnswer, with_run, with_skip

logger = logging.getLogger(__name__)

TICK_SECONDS = 1.0  # a schedule fires within a second of its time; `run` is seen as soon


class Launcher(Protocol):
    async def launch(self, routine: Routine, firing: Firing) -> LaunchedRun:
        """Starts the firing's task; RoutineError (said where its people see it) if it cannot."""
        ...

    async def outcome(self, routine: Routine, run: LaunchedRun) -> RunOutcome:
        """Waits for the run's end and says how it went."""
        ...

    async def notify(self, routine: Routine, text: str) -> None:
        """Tells the routine's owner and channel ``text`` (it paused itself)."""
        ...


def parse_time(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


class RoutineService:
    def __init__(
        self,
        routines: Sequence[Routine],
        states: RoutineStates,
        ledger: FiringLedger,
        launcher: Launcher,
        clock: Clock,
        *,
        metrics: Metrics | None = None,
        tick_seconds: float = TICK_SECONDS,
    ) -> None:
        self.routines = {routine.name: routine for routine in routines}
        self.states = states
        self.ledger = ledger
        self.launcher = launcher
        self.clock = clock
        self.metrics = metrics
        self.tick_seconds = tick_seconds
        self._running: dict[str, LaunchedRun] = {}
        self._watchers: set[asyncio.Task[None]] = set()
        self._loop: asyncio.Task[None] | None = None
        self._lock = asyncio.Lock()  # one firing decided at a time
        self._tick_lock = asyncio.Lock()  # one tick at a time: a slot is looked at once

    # ------------------------------------------------------------------ lifecycle

    async def start(self) -> None:
        """Marks when each schedule began to be watched (no slot before is owed), follows the
        runs a previous start left working, then ticks every ``tick_seconds``."""
        now = timestamp(self.clock.now())
        for routine in self.routines.values():
            state = await self._update(
                routine.name,
                lambda s: s if s.watch_from else dataclasses.replace(s, watch_from=now),
            )
            for run in state.runs:
                if run.status == "running" and run.slug is not None:
                    launched = LaunchedRun(run.slug, run.thread or "", run.agent_id)
                    self._running[routine.name] = launched
                    self._follow(routine, run.firing, launched)
            if state.queued and routine.name not in self._running:
                await self._next_queued(routine)  # its run ended while no one watched
        self._loop = asyncio.create_task(self._ticking(), name="routines")

    async def close(self) -> None:
        for task in [*self._watchers, *([self._loop] if self._loop else [])]:
            task.cancel()
        for task in [*self._watchers, *([self._loop] if self._loop else [])]:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._loop = None

    async def runs_ended(self) -> None:
        """Returns once the runs followed now have ended and been recorded."""
        while self._watchers:
            await asyncio.gather(*list(self._watchers), return_exceptions=True)

    async def _ticking(self) -> None:
        while True:
            try:
                await self.tick()
            except Exception:  # the top of the scheduler's loop: it must go on ticking
                logger.exception("the routines' tick failed")
            await asyncio.sleep(self.tick_seconds)

    async def tick(self) -> None:
        """Fires what is due now and takes the run requests waiting."""
        async with self._tick_lock:
            await self._tick()

    async def _tick(self) -> None:
        for request in await asyncio.to_thread(self.states.take_requests):
            routine = self.routines.get(request["routine"])
            answer: RunAnswer
            if routine is None:
                answer = {"error": f"no routine {request['routine']!r} in config.yaml"}
            else:
                firing = Firing(
                    routine.name,
                    "run",
                    f"run:{request['id']}",
                    timestamp(self.clock.now()),
                    f"`harness routines run` by {request['by']}",
                    by=request["by"],
                )
                started = await self.fire(routine, firing)
                answer = (
                    {"slug": started.slug, "thread": started.thread}
                    if isinstance(started, LaunchedRun)
                    else {"error": started}
                )
            await asyncio.to_thread(self.states.answer, request["id"], answer)
        for routine in self.routines.values():
            if routine.schedule is not None:
                await self._schedule(routine)

    async def _schedule(self, routine: Routine) -> None:
        state = await asyncio.to_thread(self.states.read, routine.name)
        last = state.last_slot or state.watch_from
        if last is None:
            return
        now = self.clock.now()
        slots = due(routine, parse_time(last), now)
        if slots.last is None:
            return
        if slots.missed:
            assert slots.first_missed is not None
            catch_up = int(routine.catch_up.total_seconds() // 60)
            why = (
                "missed while the bot was down (only the newest missed slot runs, and only "
                f"within catchUp, {catch_up} min)"
            )
            if slots.missed > 1:
                why = f"{slots.missed} slots, up to {timestamp(slots.last_missed or now)}, {why}"
            await self._skip(
                routine, Skip(timestamp(slots.first_missed), why, slots.missed), "missed"
            )
        if slots.run is not None:
            expression = routine.schedule.expression if routine.schedule else ""
            why = f"schedule `{expression}` ({routine.timezone})"
            if now - slots.run > ON_TIME:
                why += ", caught up: the bot was down at that time"
            key = f"schedule:{timestamp(slots.run)}"
            await self.fire(
                routine, Firing(routine.name, "schedule", key, timestamp(slots.run), why)
            )
        last_slot = timestamp(slots.last)
        await self._update(routine.name, lambda s: dataclasses.replace(s, last_slot=last_slot))

    # ------------------------------------------------------------------ firing

    async def fire(self, routine: Routine, firing: Firing) -> LaunchedRun | str:
        """Starts the firing's task, or says why not (paused, already fired, skipped or
        queued behind the routine's last run)."""
        async with self._lock:
            state = await asyncio.to_thread(self.states.read, routine.name)
            if state.paused is not None:
                why = (
                    f"the routine is paused ({state.paused.why}); "
                    f"`harness routines resume {routine.name}` resumes it"
                )
                await self._skip(routine, Skip(firing.at, f"{firing.kind}: paused"), "paused")
                return why
            if not await self.ledger.claim(routine.name, firing.key):
                if self.metrics is not None:
                    self.metrics.routine_skips.labels(routine.name, "duplicate").inc()
                return "this firing already ran (a re-delivered event, or another bot process)"
            running = self._running.get(routine.name)
            if running is not None:
                if routine.overlap == "skip":
                    why = f"{firing.kind}: its last run `{running.slug}` was still working"
                    await self._skip(routine, Skip(firing.at, why), "overlap")
                    return f"not started: the last run `{running.slug}` is still working"
                await self._update(
                    routine.name, lambda s: dataclasses.replace(s, queued=(*s.queued, firing))
                )
                return f"queued: it starts when the last run `{running.slug}` ends"
            return await self._launch(routine, firing)

    async def _launch(self, routine: Routine, firing: Firing) -> LaunchedRun | str:
        try:
            run = await self.launcher.launch(routine, firing)
        except HarnessError as exc:  # RoutineError too: said in the thread by the launcher
            logger.warning("routine %s could not start: %s", routine.name, exc.message)
            thread = exc.thread if isinstance(exc, RoutineError) else None
            record = RunRecord(
                firing.key, firing.kind, firing.at, "failed", thread=thread, error=exc.message
            )
            await self._ended(routine, record)
            return f"could not start: {exc.message}"
        if self.metrics is not None:
            self.metrics.routine_firings.labels(routine.name, firing.kind).inc()
        record = RunRecord(
            firing.key,
            firing.kind,
            firing.at,
            "running",
            slug=run.slug,
            thread=run.thread,
            agent_id=run.agent_id,
        )
        await self._update(routine.name, lambda s: with_run(s, record))
        self._running[routine.name] = run
        self._follow(routine, firing.key, run)
        return run

    def _follow(self, routine: Routine, key: str, run: LaunchedRun) -> None:
        async def follow() -> None:
            try:
                outcome = await self.launcher.outcome(routine, run)
            except HarnessError as exc:
                outcome = RunOutcome("failed", error=exc.message)
            state = await asyncio.to_thread(self.states.read, routine.name)
            before = next((r for r in state.runs if r.firing == key), None)
            record = RunRecord(
                key,
                before.kind if before else "run",
                before.at if before else timestamp(self.clock.now()),
                outcome.status,
                slug=run.slug,
                thread=run.thread,
                agent_id=run.agent_id,
                cost_usd=outcome.cost_usd,
                error=outcome.error,
            )
            if self._running.get(routine.name) == run:
                del self._running[routine.name]
            await self._ended(routine, record)
            await self._next_queued(routine)

        task = asyncio.create_task(follow(), name=f"routine {routine.name}")
        self._watchers.add(task)
        task.add_done_callback(self._watchers.discard)

    async def _next_queued(self, routine: Routine) -> None:
        """Starts the oldest firing queued behind the run that ended (taken off the queue
        as it starts, as a firing is claimed as it starts)."""
        async with self._lock:
            if routine.name in self._running:
                return
            taken: list[Firing] = []

            def take(state: RoutineState) -> RoutineState:
                taken[:] = state.queued[:1]
                return dataclasses.replace(state, queued=state.queued[1:])

            state = await asyncio.to_thread(self.states.read, routine.name)
            if state.queued:
                await self._update(routine.name, take)
            if taken:
                await self._launch(routine, taken[0])

    async def _ended(self, routine: Routine, record: RunRecord) -> None:
        failed = record.status == "failed"
        if failed and self.metrics is not None:
            self.metrics.routine_failures.labels(routine.name).inc()

        def change(state: RoutineState) -> RoutineState:
            state = with_run(state, record)
            failures = (
                state.failures + 1
                if failed
                else 0
                if record.status == "completed"
                else state.failures
            )
            state = dataclasses.replace(state, failures=failures)
            if failures >= routine.disable_after_failures and state.paused is None:
                last = f" (`{record.slug}`)" if record.slug else ""
                why = f"{failures} failed runs in a row; the last{last}: {record.error or 'failed'}"
                state = dataclasses.replace(
                    state, paused=Pause(timestamp(self.clock.now()), "failures", why)
                )
            return state

        before = await asyncio.to_thread(self.states.read, routine.name)
        after = await self._update(routine.name, change)
        if after.paused is not None and before.paused is None:
            text = (
                f"⏸️ Routine *{routine.name}* paused itself: {after.paused.why}. Fix the "
                f"cause, then `harness routines resume {routine.name}` (or Resume in "
                "`/harness routines`)."
            )
            try:
                await self.launcher.notify(routine, text)
            except HarnessError as exc:
                logger.warning(
                    "could not tell routine %s's people it paused: %s", routine.name, exc
                )

    async def _skip(self, routine: Routine, skip: Skip, reason: str) -> None:
        if self.metrics is not None:
            self.metrics.routine_skips.labels(routine.name, reason).inc(skip.count)
        logger.info("routine %s: skipped %s (%s)", routine.name, skip.at, skip.why)
        await self._update(routine.name, lambda s: with_skip(s, skip))

    async def _update(
        self, name: str, change: Callable[[RoutineState], RoutineState]
    ) -> RoutineState:
        return await asyncio.to_thread(self.states.update, name, change)
