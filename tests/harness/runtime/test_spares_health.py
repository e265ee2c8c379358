"""Spares that never hurt: a spare whose CLI was killed while it waited (the OOM killer, an
operator) is closed and replaced, and the request that would have taken it starts cold and
completes; idle spares keep within their caps of count and memory. The real Claude Code CLI
in its sandbox against the scripted model; spares killed with a real SIGKILL."""

from __future__ import annotations

import asyncio
import os
import signal
import time

import pytest

from harness.runtime.spare_health import process_tree, resident_bytes
from harness.runtime.spec import SpareLimits
from tests.harness.runtime.test_spares import WAIT, Rig, rig, spec_for, template

pytestmark = [pytest.mark.anyio, pytest.mark.slow, pytest.mark.subprocess, pytest.mark.waits]

__all__ = ["rig"]  # the fixture, shared

MB = 1024 * 1024


def kill_cli(launcher: int | None) -> int:
    """SIGKILLs the ``claude`` process below a spare's launcher (its sandbox), as the OOM
    killer would; its pid."""
    assert launcher is not None
    for pid in process_tree(launcher):
        try:
            with open(f"/proc/{pid}/comm", encoding="utf-8") as comm:
                if comm.read().strip() == "claude":
                    os.kill(pid, signal.SIGKILL)
                    return pid
        except OSError:
            continue
    raise AssertionError("no claude process below the spare's launcher")


async def test_a_spare_killed_while_it_waited_gives_way_to_a_cold_start_and_is_replaced(
    rig: Rig,
) -> None:
    queued = [False]  # agents queue: no replacement may start yet
    settle = 1.0
    rig.host.keep_warm(
        [(template(), 1)], busy=lambda: queued[0], limits=SpareLimits(settle_seconds=settle)
    )
    spares = rig.host.spares
    assert spares is not None
    await spares.wait_ready(1, WAIT)
    [launcher] = spares.ready_pids()
    queued[0] = True
    kill_cli(launcher)

    done = await rig.run(spec_for("t-after", "task t-after: write it"))

    assert done.status == "completed", done.error
    assert done.error is None  # no error, no ❌: it started cold
    # Found dead when taken or by its watch, or (a kill is not instant) when it failed to
    # take the prompt: once in all.
    assert spares.died + rig.host.spares_dead_at_start == 1
    assert (rig.root / "t-after" / "out.txt").read_text(encoding="utf-8") == "made\n"
    assert spares.ready == 0 and spares.starting == 0  # held back while agents queue
    queued[0] = False
    emptied = time.monotonic()
    spares.nudge()  # the queue emptied: the replacement waits for the load to settle
    assert spares.starting == 0
    await spares.wait_until(lambda: spares.starting + spares.ready == 1, WAIT)
    assert time.monotonic() - emptied >= settle * 0.99  # then starts by itself, unnudged
    await spares.wait_until(lambda: spares.ready == 1, WAIT)
    assert spares.ready_pids() != [launcher]


async def test_an_idle_spare_whose_cli_dies_is_replaced_without_any_request(rig: Rig) -> None:
    rig.host.keep_warm([(template(), 1)])
    spares = rig.host.spares
    assert spares is not None
    await spares.wait_ready(1, WAIT)
    [launcher] = spares.ready_pids()

    kill_cli(launcher)
    await spares.wait_until(lambda: spares.died == 1, WAIT)
    await spares.wait_until(lambda: spares.ready == 1, WAIT)

    state = (spares.ready_pids(), spares.started, spares.died)
    [replacement] = spares.ready_pids()
    assert replacement != launcher and replacement is not None, state
    assert spares.started == 2, state
    done = await rig.run(spec_for("t-next", "task t-next: write it"))
    assert done.status == "completed", done.error
    assert spares.served == 1, state


async def test_a_follow_up_whose_spare_was_killed_starts_cold_and_completes(rig: Rig) -> None:
    rig.host.keep_warm([], follow_ups=1)
    follow_ups = rig.host.follow_ups
    assert follow_ups is not None
    first = await rig.run(spec_for("t-thread", "task t-thread: write it"))
    assert first.status == "completed", first.error
    await follow_ups.wait_for("t-thread", WAIT)
    kill_cli(follow_ups.ready_pids()["t-thread"])

    again = await rig.run(spec_for("t-thread", "task t-thread: and more"))

    assert again.status == "completed", again.error
    assert follow_ups.died + rig.host.spares_dead_at_start == 1


async def test_no_more_idle_spares_start_than_max_idle(rig: Rig) -> None:
    rig.host.keep_warm([(template(), 3)], limits=SpareLimits(max_idle=2))
    spares = rig.host.spares
    assert spares is not None
    await spares.wait_ready(2, WAIT)
    await spares.settled(WAIT)

    assert (spares.ready, spares.started) == (2, 2)


async def test_idle_spares_over_the_memory_cap_close_the_newest_and_no_other_starts(
    rig: Rig,
) -> None:
    rig.host.keep_warm([(template(), 2)])
    spares = rig.host.spares
    assert spares is not None
    await spares.wait_ready(2, WAIT)
    pids = spares.ready_pids()
    held = [await asyncio.to_thread(resident_bytes, pid) for pid in pids]
    assert all(size > 50 * MB for size in held), held  # a CLI's tree, measured from /proc

    # Room for one of them (and less than for one more): the newest gives way.
    cap = (max(held) + min(held) // 2) // MB
    rig.host.keep_warm([(template(), 2)], limits=SpareLimits(max_memory_mb=cap))
    await spares.wait_until(lambda: spares.ready == 1, WAIT)
    await spares.settled(WAIT)

    assert spares.ready_pids() == [pids[0]]
    assert rig.host.spare_budget.trimmed == 1 and spares.started == 2
