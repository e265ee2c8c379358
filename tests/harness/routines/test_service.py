"""The scheduler with a FakeClock and a launcher that records what it starts: each due slot
fires once, a restart across a firing time runs it once within catchUp (or records it
skipped), overlap and pause rules, and the routine that pauses itself after failed runs.
The bot's launcher is exercised in tests/bot/test_routines_in_slack.py."""

from __future__ import annotations

import asyncio
import dataclasses
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from harness.config.cron import parse_cron
from harness.config.routines_schema import Routine
from harness.routines.ledger import FileFiringLedger, NatsFiringLedger
from harness.routines.model import Firing, LaunchedRun, RoutineError, RunOutcome, Starting
from harness.routines.service import RoutineService
from harness.routines.state import RoutineStates
from harness.testing.clock import FakeClock
from harness.testing.nats_server import NatsServer

pytestmark = pytest.mark.anyio

START = datetime(2026, 1, 1, 9, 59, 30, tzinfo=UTC)


def hourly(**overrides: object) -> Routine:
    options: dict[str, object] = {
        "name": "hourly",
        "kind": "schedule",
        "channel": "C1",
        "role": "developer",
        "prompt": "look",
        "owner": "U1",
        "schedule": parse_cron("0 * * * *"),
        "catch_up": timedelta(minutes=30),
    } | overrides
    return Routine(**options)  # type: ignore[arg-type]


@dataclass
class Launches:
    """Starts nothing: records each firing, and ends its run when the test says."""

    fired: list[Firing] = field(default_factory=list)
    ends: dict[str, asyncio.Future[RunOutcome]] = field(default_factory=dict)
    told: list[str] = field(default_factory=list)
    refuse: bool = False
    # Runs whose task was made, by their firing's key (what ``find`` finds after a restart).
    made: dict[str, LaunchedRun] = field(default_factory=dict)
    # Set: a launch hangs (before its task is made, or after with ``hang_after``) until the
    # service is closed, as a process that dies there.
    hang: asyncio.Event | None = None
    hang_after: bool = False

    async def launch(self, routine: Routine, firing: Firing) -> LaunchedRun:
        if self.refuse:
            raise RoutineError(routine.name, "the prompt names {payload.version}")
        if self.hang is not None and not self.hang_after:
            self.hang.set()
            await asyncio.Event().wait()
        self.fired.append(firing)
        slug = f"run-{len(self.fired)}"
        self.ends[slug] = asyncio.get_running_loop().create_future()
        run = LaunchedRun(slug, f"https://slack/{slug}", f"agent-{len(self.fired)}")
        self.made[firing.key] = run
        if self.hang is not None:
            self.hang.set()
            await asyncio.Event().wait()
        return run

    async def find(self, routine: Routine, firing: Firing) -> LaunchedRun | None:
        return self.made.get(firing.key)

    async def outcome(self, routine: Routine, run: LaunchedRun) -> RunOutcome:
        if run.slug not in self.ends:  # a run a previous start left: it ended meanwhile
            return RunOutcome("completed", cost_usd=0.5)
        return await self.ends[run.slug]

    async def notify(self, routine: Routine, text: str) -> None:
        self.told.append(text)

    def end(self, slug: str, status: str = "completed", error: str | None = None) -> None:
        self.ends[slug].set_result(RunOutcome(status, cost_usd=0.25, error=error))  # type: ignore[arg-type]


def service(
    tmp_path: Path, clock: FakeClock, launches: Launches, *routines: Routine
) -> RoutineService:
    return RoutineService(
        routines or (hourly(),),
        RoutineStates(tmp_path / "tasks"),
        FileFiringLedger(tmp_path / "tasks" / ".routines" / "fired"),
        launches,
        clock,
        tick_seconds=3600,  # the test ticks by hand
    )


async def test_a_due_slot_fires_once_however_often_it_ticks(tmp_path: Path) -> None:
    clock, launches = FakeClock(START), Launches()
    scheduler = service(tmp_path, clock, launches)
    await scheduler.start()
    try:
        await scheduler.tick()
        assert launches.fired == []
        clock.advance(31)  # 10:00:01
        await scheduler.tick()
        await scheduler.tick()
        assert [f.key for f in launches.fired] == ["schedule:2026-01-01T10:00:00.000Z"]
        assert launches.fired[0].why == "schedule `0 * * * *` (UTC)"
    finally:
        await scheduler.close()


async def test_a_restart_across_the_firing_time_runs_it_once_within_catch_up(
    tmp_path: Path,
) -> None:
    clock, launches = FakeClock(START), Launches()
    first = service(tmp_path, clock, launches)
    await first.start()
    await first.tick()
    await first.close()  # down over 10:00
    clock.advance(20 * 60)
    again = service(tmp_path, clock, launches)
    await again.start()
    try:
        await again.tick()
        await again.tick()
        assert [f.key for f in launches.fired] == ["schedule:2026-01-01T10:00:00.000Z"]
        assert "caught up" in launches.fired[0].why
        state = again.states.read("hourly")
        assert state.last_slot == "2026-01-01T10:00:00.000Z" and state.skipped == ()
    finally:
        await again.close()


async def test_a_slot_older_than_catch_up_is_recorded_skipped_not_run(tmp_path: Path) -> None:
    clock, launches = FakeClock(START), Launches()
    first = service(tmp_path, clock, launches)
    await first.start()
    await first.close()
    clock.advance(45 * 60)  # 10:44:30, the 10:00 slot is 44 minutes old
    again = service(tmp_path, clock, launches)
    await again.start()
    try:
        await again.tick()
        assert launches.fired == []
        (skip,) = again.states.read("hourly").skipped
        assert skip.at == "2026-01-01T10:00:00.000Z"
        assert "missed while the bot was down" in skip.why and "30 min" in skip.why
    finally:
        await again.close()


async def test_overlap_skip_records_the_firing_and_queue_runs_it_after(tmp_path: Path) -> None:
    clock, launches = FakeClock(START), Launches()
    skipping = hourly(name="skipping", kind="http", schedule=None)
    queueing = hourly(name="queueing", kind="http", schedule=None, overlap="queue")
    scheduler = service(tmp_path, clock, launches, skipping, queueing)
    await scheduler.start()
    try:
        now = "2026-01-01T10:00:00.000Z"
        for routine in (skipping, queueing):
            first = await scheduler.fire(routine, Firing(routine.name, "http", "a", now, "call"))
            assert isinstance(first, LaunchedRun)
        skipped = await scheduler.fire(skipping, Firing("skipping", "http", "b", now, "call"))
        queued = await scheduler.fire(queueing, Firing("queueing", "http", "b", now, "call"))
        assert skipped == "not started: the last run `run-1` is still working"
        assert queued == "queued: it starts when the last run `run-2` ends"
        assert len(launches.fired) == 2
        launches.end("run-2")
        await asyncio.wait_for(_until(lambda: len(launches.fired) == 3), 5)
        assert launches.fired[2].routine == "queueing"
        assert "still working" in scheduler.states.read("skipping").skipped[0].why
    finally:
        await scheduler.close()


async def test_a_firing_queued_behind_a_run_is_started_after_a_restart(tmp_path: Path) -> None:
    clock = FakeClock(START)
    routine = hourly(kind="http", schedule=None, overlap="queue")
    now = "2026-01-01T10:00:00.000Z"
    before = service(tmp_path, clock, Launches(), routine)
    await before.start()
    try:
        assert isinstance(await before.fire(routine, Firing("hourly", "http", "a", now, "call")),
                          LaunchedRun)  # fmt: skip
        queued = Firing("hourly", "http", "b", now, "call", fields={"payload": {"version": "7"}})
        said = await before.fire(routine, queued)
        assert isinstance(said, str) and said.startswith("queued")
    finally:
        await before.close()  # stopped while run-1 works and b waits behind it

    launches = Launches()
    after = service(tmp_path, clock, launches, routine)
    await after.start()  # run-1 ended meanwhile: b starts
    try:
        await asyncio.wait_for(_until(lambda: len(launches.fired) == 1), 5)
        [started] = launches.fired
        assert (started.key, started.fields) == ("b", {"payload": {"version": "7"}})
        assert after.states.read("hourly").queued == ()
    finally:
        await after.close()


async def died_starting(tmp_path: Path, clock: FakeClock, launches: Launches) -> None:
    """A scheduler that claims the 10:00 slot and stops in its launch (``launches.hang``)."""
    launches.hang = asyncio.Event()
    first = service(tmp_path, clock, launches)
    await first.start()
    clock.advance(31)  # 10:00:01
    ticking = asyncio.ensure_future(first.tick())
    await asyncio.wait_for(launches.hang.wait(), 5)
    ticking.cancel()
    await asyncio.gather(ticking, return_exceptions=True)
    await first.close()
    launches.hang = None
    (starting,) = first.states.read("hourly").starting
    assert starting.firing.key == "schedule:2026-01-01T10:00:00.000Z"


async def test_a_firing_whose_task_was_never_made_starts_once_at_the_next_start(
    tmp_path: Path,
) -> None:
    clock, launches = FakeClock(START), Launches()
    await died_starting(tmp_path, clock, launches)
    assert launches.fired == []
    clock.advance(60)
    again = service(tmp_path, clock, launches)
    await again.start()
    try:
        await again.tick()
        assert [f.key for f in launches.fired] == ["schedule:2026-01-01T10:00:00.000Z"]
        state = again.states.read("hourly")
        assert state.starting == () and [r.status for r in state.runs] == ["running"]
        launches.end("run-1")
        await asyncio.wait_for(again.runs_ended(), 5)
        assert [r.status for r in again.states.read("hourly").runs] == ["completed"]
    finally:
        await again.close()


async def test_a_firing_whose_task_was_made_is_followed_not_started_again(tmp_path: Path) -> None:
    clock, launches = FakeClock(START), Launches(hang_after=True)
    await died_starting(tmp_path, clock, launches)
    assert list(launches.made) == ["schedule:2026-01-01T10:00:00.000Z"]
    again = service(tmp_path, clock, launches)
    await again.start()
    try:
        await again.tick()
        assert len(launches.fired) == 1
        (run,) = again.states.read("hourly").runs
        assert (run.status, run.slug) == ("running", "run-1")
        launches.end("run-1")
        await asyncio.wait_for(again.runs_ended(), 5)
        state = again.states.read("hourly")
        assert state.starting == () and [r.status for r in state.runs] == ["completed"]
    finally:
        await again.close()


async def test_a_half_started_firing_older_than_catch_up_is_recorded_skipped(
    tmp_path: Path,
) -> None:
    clock, launches = FakeClock(START), Launches()
    await died_starting(tmp_path, clock, launches)
    clock.advance(45 * 60)
    again = service(tmp_path, clock, launches)
    await again.start()
    try:
        await again.tick()
        assert launches.fired == []
        state = again.states.read("hourly")
        assert state.starting == ()
        (skip,) = state.skipped
        assert skip.at == "2026-01-01T10:00:00.000Z"
        assert "stopped before its task was made" in skip.why and "30 min" in skip.why
    finally:
        await again.close()


def left_starting(tmp_path: Path, owner: str) -> Firing:
    """The state a process leaves when it dies between recording the 10:00 slot starting
    and claiming it."""
    firing = Firing("hourly", "schedule", "schedule:2026-01-01T10:00:00.000Z",
                    "2026-01-01T10:00:00.000Z", "schedule `0 * * * *` (UTC)")  # fmt: skip
    entry = Starting(firing, owner)
    RoutineStates(tmp_path / "tasks").update(
        "hourly", lambda s: dataclasses.replace(s, starting=(entry,), watch_from=firing.at)
    )
    return firing


async def test_a_firing_recorded_starting_but_never_claimed_is_claimed_and_started_once(
    tmp_path: Path,
) -> None:
    clock, launches = FakeClock(START + timedelta(minutes=1)), Launches()
    firing = left_starting(tmp_path, "dead-process")
    again = service(tmp_path, clock, launches)
    await again.start()
    try:
        await again.tick()
        assert [f.key for f in launches.fired] == [firing.key]
        assert await again.ledger.owner("hourly", firing.key) == again.token
    finally:
        await again.close()


async def test_a_firing_left_starting_that_another_process_claimed_is_left_to_it(
    tmp_path: Path,
) -> None:
    clock, launches = FakeClock(START + timedelta(minutes=1)), Launches()
    firing = left_starting(tmp_path, "dead-process")
    other = FileFiringLedger(tmp_path / "tasks" / ".routines" / "fired")
    assert await other.claim("hourly", firing.key, "live-process")
    again = service(tmp_path, clock, launches)
    await again.start()
    try:
        await again.tick()
        assert launches.fired == []
        assert again.states.read("hourly").starting == ()
    finally:
        await again.close()


async def _until(check: object) -> None:
    while not check():  # type: ignore[operator]
        await asyncio.sleep(0.01)


async def test_a_firing_already_claimed_starts_nothing(tmp_path: Path) -> None:
    clock, launches = FakeClock(START), Launches()
    routine = hourly(kind="github", schedule=None)
    scheduler = service(tmp_path, clock, launches, routine)
    await scheduler.start()
    try:
        firing = Firing(routine.name, "github", "github:delivery-1", "t", "GitHub")
        assert isinstance(await scheduler.fire(routine, firing), LaunchedRun)
        launches.end("run-1")
        again = await scheduler.fire(routine, firing)
        assert isinstance(again, str) and "already ran" in again
        assert len(launches.fired) == 1
    finally:
        await scheduler.close()


async def test_failed_runs_in_a_row_pause_the_routine_and_tell_its_people(tmp_path: Path) -> None:
    clock, launches = FakeClock(START), Launches()
    routine = hourly(kind="http", schedule=None, disable_after_failures=2)
    scheduler = service(tmp_path, clock, launches, routine)
    await scheduler.start()
    try:
        for index in (1, 2):
            await scheduler.fire(routine, Firing(routine.name, "http", f"k{index}", "t", "call"))
            launches.end(f"run-{index}", "failed", error="the tests would not run")
            await asyncio.wait_for(
                _until(lambda i=index: scheduler.states.read(routine.name).failures == i), 5
            )
        await asyncio.wait_for(scheduler.runs_ended(), 5)  # its people told as the run ends
        state = scheduler.states.read(routine.name)
        assert state.paused is not None and state.paused.by == "failures"
        assert launches.told == [
            "⏸️ Routine *hourly* paused itself: 2 failed runs in a row; the last (`run-2`): the "
            "tests would not run. Fix the cause, then `harness routines resume hourly` (or Resume "
            "in `/harness routines`)."
        ]
        refused = await scheduler.fire(routine, Firing(routine.name, "http", "k3", "t", "call"))
        assert isinstance(refused, str) and refused.startswith("the routine is paused")
        assert len(launches.fired) == 2
    finally:
        await scheduler.close()


async def test_a_run_that_cannot_start_counts_as_failed(tmp_path: Path) -> None:
    clock, launches = FakeClock(START), Launches(refuse=True)
    routine = hourly(kind="http", schedule=None, disable_after_failures=1)
    scheduler = service(tmp_path, clock, launches, routine)
    await scheduler.start()
    try:
        said = await scheduler.fire(routine, Firing(routine.name, "http", "k", "t", "call"))
        assert said == "could not start: the prompt names {payload.version}"
        state = scheduler.states.read(routine.name)
        assert (state.runs[0].status, state.failures) == ("failed", 1)
        assert state.paused is not None
    finally:
        await scheduler.close()


@pytest.mark.nats
async def test_two_schedulers_on_one_nats_server_fire_a_slot_once(tmp_path: Path) -> None:
    import nats

    clock, launches = FakeClock(START), Launches()
    async with NatsServer(tmp_path / "nats") as server:
        clients = [await nats.connect(server.url) for _ in range(2)]
        try:
            schedulers = [
                RoutineService(
                    (hourly(),),
                    RoutineStates(tmp_path / f"machine-{index}" / "tasks"),  # nothing shared
                    await NatsFiringLedger.open(client.jetstream(), "HARNESS_ROUTINES"),
                    launches,
                    clock,
                    tick_seconds=3600,
                )
                for index, client in enumerate(clients)
            ]
            for scheduler in schedulers:
                await scheduler.start()
            clock.advance(31)  # 10:00:01
            await asyncio.gather(*(scheduler.tick() for scheduler in schedulers))
            await asyncio.gather(*(scheduler.tick() for scheduler in schedulers))

            assert [f.key for f in launches.fired] == ["schedule:2026-01-01T10:00:00.000Z"]
            for scheduler in schedulers:
                await scheduler.close()
        finally:
            for client in clients:
                await client.close()
