"""The routines' scheduler: fires each due schedule slot once, takes the firings of the other
triggers (a GitHub event, an HTTP call, `harness routines run`), and records what each run did.

A firing starts a task only when the ledger lets it claim its key (so once, across restarts
and bot processes), the routine is not paused, and its overlap rule allows it (``skip``: not
while its last run works; ``queue``: after it). A slot missed while nobody watched runs once
at start when it is within ``catchUp``, and is recorded skipped otherwise. A claimed firing
is recorded starting until its run is recorded, so a process that dies in between leaves it
to the next start: its task found (the run followed), or started once within ``catchUp``, or
recorded skipped. After
``disableAfterFailures`` failed runs in a row the routine pauses itself and its launcher tells
its owner and channel why. The front end supplies the launcher (how a task starts where its
people see it); time is the injected clock's.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import os
from collections.abc import Callable, Sequence
from datetime import datetime

from harness.clock import Clock, timestamp
from harness.config.routines_schema import Routine
from harness.errors import HarnessError
from harness.metrics import Metrics
from harness.routines.launcher import Launcher
from harness.routines.ledger import FiringLedger
from harness.routines.model import (
    Firing,
    LaunchedRun,
    RoutineError,
    RoutineState,
    RunOutcome,
    RunRecord,
    Skip,
    Starting,
)
from harness.routines.schedule import ON_TIME, due
from harness.routines.state import (
    RoutineStates,
    RunAnswer,
    with_ended_run,
    with_run,
    with_skip,
    without_starting,
)
from harness.waits import stop_tasks

logger = logging.getLogger(__name__)

Change = Callable[[RoutineState], RoutineState]
TICK_SECONDS = 1.0  # a schedule fires within a second of its time; `run` is seen as soon


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
        self._serving: int | None = None  # the lock that says a scheduler takes requests
        # This process's name in the ledger's claims and the firings it records starting.
        self.token = clock.token(8)

    # ------------------------------------------------------------------ lifecycle

    async def start(self) -> None:
        """Serves requests and schedules (one process: its scheduler is the only one)."""
        await self.serve()
        await self.schedule()

    async def serve(self) -> None:
        """Takes the lock that tells `harness routines run` a scheduler takes requests."""
        self._serving = await asyncio.to_thread(self.states.serve)

    async def schedule(self) -> None:
        """Marks when each schedule began to be watched (no slot before is owed), follows the
        runs a previous scheduler left working, then ticks every ``tick_seconds``. With
        replicas, only the one holding the routines' lease schedules."""
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
            for entry in state.starting:
                await self._resolve(routine, entry)
            if state.queued and routine.name not in self._running:
                await self._next_queued(routine)  # its run ended while no one watched
        self._loop = asyncio.create_task(self._ticking(), name="routines")

    async def unschedule(self) -> None:
        """Stops ticking and following runs: another scheduler (a replica that took the
        routines' lease) follows them from their recorded state."""
        await stop_tasks([*self._watchers, *([self._loop] if self._loop else [])])
        self._loop = None
        self._running.clear()

    async def close(self) -> None:
        await self.unschedule()
        if self._serving is not None:
            os.close(self._serving)
            self._serving = None

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
            return await self._start(routine, firing, claim=True)

    def _duplicate(self, routine: Routine) -> str:
        if self.metrics is not None:
            self.metrics.routine_skips.labels(routine.name, "duplicate").inc()
        return "this firing already ran (a re-delivered event, or another bot process)"

    def _not_now(self, routine: Routine, firing: Firing) -> tuple[str, Change] | None:
        """What becomes of a claimed firing while the routine's last run works (its overlap
        rule): what to say, and the state's change; None: it starts."""
        running = self._running.get(routine.name)
        if running is None:
            return None
        if routine.overlap == "queue":
            said = f"queued: it starts when the last run `{running.slug}` ends"
            return said, lambda s: dataclasses.replace(s, queued=(*s.queued, firing))
        skip = Skip(firing.at, f"{firing.kind}: its last run `{running.slug}` was still working")
        self._skipped(routine, skip, "overlap")
        said = f"not started: the last run `{running.slug}` is still working"
        return said, lambda s: with_skip(s, skip)

    async def _start(
        self, routine: Routine, firing: Firing, *, claim: bool = False, queued: bool = False
    ) -> LaunchedRun | str:
        """Records the firing as starting, held by this process until its run is recorded,
        then (``claim``) claims it in the ledger and launches it. A firing taken off the
        queue (``queued``) was claimed when it came, and leaves the queue in the same write."""
        hold = await asyncio.to_thread(self.states.hold_firing, routine.name, firing.key)
        if hold is None:  # another process is starting it now
            return self._duplicate(routine) if claim else "another bot process started it"
        gone: list[bool] = []

        def starting(state: RoutineState) -> RoutineState:
            rest = tuple(f for f in state.queued if f.key != firing.key)
            if queued and len(rest) == len(state.queued):
                gone.append(True)  # another process started it meanwhile
                return state
            # A schedule's slot is handled once it starts: a restart does not count it missed.
            slot = state.last_slot
            if firing.kind == "schedule" and (slot is None or slot < firing.at):
                slot = firing.at
            entry = Starting(firing, self.token, claimed=queued)
            return dataclasses.replace(
                state,
                queued=rest if queued else state.queued,
                starting=(*without_starting(state, firing.key).starting, entry),
                last_slot=slot,
            )

        try:
            await self._update(routine.name, starting)
            if gone:
                return "another bot process started this firing"
            if claim:
                # Claimed after it is recorded starting: a death in between leaves a record
                # whose claim a later start can settle (the ledger keeps who claimed).
                verdict: tuple[str, Change] | None
                if not await self.ledger.claim(routine.name, firing.key, self.token):
                    verdict = self._duplicate(routine), lambda s: s
                else:
                    verdict = self._not_now(routine, firing)
                if verdict is not None:
                    said, change = verdict
                    await self._update(
                        routine.name, lambda s: change(without_starting(s, firing.key))
                    )
                    return said
            return await self._launch(routine, firing)
        finally:
            await asyncio.to_thread(hold.release)

    async def _resolve(self, routine: Routine, entry: Starting) -> None:
        """A firing a process left starting when it died: claimed by another process, it is
        theirs; else its task, when one was made, is its run; else it starts now within
        catchUp, or is recorded skipped."""
        firing = entry.firing
        hold = await asyncio.to_thread(self.states.hold_firing, routine.name, firing.key)
        if hold is None:
            return  # another process is starting it now
        try:
            state = await asyncio.to_thread(self.states.read, routine.name)
            if all(s.firing.key != firing.key for s in state.starting):
                return  # its run was recorded meanwhile
            if not entry.claimed and not await self.ledger.claim(
                routine.name, firing.key, self.token
            ):
                owner = await self.ledger.owner(routine.name, firing.key)
                if owner != entry.owner:  # another process's firing: it accounts for it
                    await self._update(routine.name, lambda s: without_starting(s, firing.key))
                    return
            found = await self.launcher.find(routine, firing)
            if found is not None and found.agent_id is None:
                why = "the bot stopped after making the run's task, before its agent started"
                record = RunRecord(firing.key, firing.kind, firing.at, "interrupted",
                                   slug=found.slug, thread=found.thread, error=why)  # fmt: skip
                await self._ended(routine, record)
            elif found is not None:
                record = RunRecord(firing.key, firing.kind, firing.at, "running", slug=found.slug,
                                   thread=found.thread, agent_id=found.agent_id)  # fmt: skip
                await self._update(routine.name, lambda s: with_run(s, record))
                self._running[routine.name] = found
                self._follow(routine, firing.key, found)
            elif self.clock.now() - parse_time(firing.at) <= routine.catch_up:
                await self._launch(routine, firing)
            else:
                minutes = int(routine.catch_up.total_seconds() // 60)
                why = (f"{firing.kind}: the bot stopped before its task was made, and it is "
                       f"older than catchUp ({minutes} min)")  # fmt: skip
                skip = Skip(firing.at, why)
                self._skipped(routine, skip, "missed")
                await self._update(
                    routine.name, lambda s: with_skip(without_starting(s, firing.key), skip)
                )
        finally:
            await asyncio.to_thread(hold.release)

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
        """Starts the oldest firing queued behind the run that ended (moved from the queue
        to the firings starting in one write)."""
        async with self._lock:
            if routine.name in self._running:
                return
            state = await asyncio.to_thread(self.states.read, routine.name)
            if state.queued:
                await self._start(routine, state.queued[0], queued=True)

    async def _ended(self, routine: Routine, record: RunRecord) -> None:
        failed = record.status == "failed"
        if failed and self.metrics is not None:
            self.metrics.routine_failures.labels(routine.name).inc()

        def change(state: RoutineState) -> RoutineState:
            now = timestamp(self.clock.now())
            return with_ended_run(state, record, routine.disable_after_failures, now)

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
        self._skipped(routine, skip, reason)
        await self._update(routine.name, lambda s: with_skip(s, skip))

    def _skipped(self, routine: Routine, skip: Skip, reason: str) -> None:
        if self.metrics is not None:
            self.metrics.routine_skips.labels(routine.name, reason).inc(skip.count)
        logger.info("routine %s: skipped %s (%s)", routine.name, skip.at, skip.why)

    async def _update(
        self, name: str, change: Callable[[RoutineState], RoutineState]
    ) -> RoutineState:
        return await asyncio.to_thread(self.states.update, name, change)
