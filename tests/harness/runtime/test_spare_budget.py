"""The load a host's spares give way to: none starts while agents queue for a slot, nor
until the queue has stayed empty for the settling time (a burst's last agents end one by
one, and a spare started between their ends takes the CPU they need)."""

from __future__ import annotations

from harness.runtime.spare_budget import SpareBudget, settle_left
from harness.runtime.spec import SpareLimits
from harness.testing.clock import FakeClock


def test_settle_left_counts_down_from_when_agents_last_queued() -> None:
    assert settle_left(None, 100.0, 3.0) == 0.0  # never queued: no wait
    assert settle_left(100.0, 100.0, 3.0) == 3.0
    assert settle_left(100.0, 102.5, 3.0) == 0.5
    assert settle_left(100.0, 103.0, 3.0) == 0.0
    assert settle_left(100.0, 250.0, 3.0) == 0.0
    assert settle_left(100.0, 100.0, 0.0) == 0.0  # no settling configured


def test_a_spare_may_start_only_once_the_queue_stayed_empty_for_the_settling_time() -> None:
    clock = FakeClock()
    queued = [False]
    budget = SpareBudget(clock)
    budget.set(SpareLimits(settle_seconds=3.0), lambda: queued[0])
    assert budget.quiet()  # nothing ever queued: a spare may start at once

    queued[0] = True
    assert not budget.quiet() and budget.settling() == 3.0
    clock.advance(10)
    assert not budget.quiet()  # however long agents queue
    queued[0] = False
    assert budget.settling() == 3.0  # last seen queueing 0 s ago (the look just before)
    clock.advance(2)
    assert not budget.quiet() and budget.settling() == 1.0
    clock.advance(1)
    assert budget.quiet() and budget.settling() == 0.0


def test_a_queue_seen_again_while_settling_starts_the_wait_over() -> None:
    clock = FakeClock()
    queued = [True]
    budget = SpareBudget(clock)
    budget.set(SpareLimits(settle_seconds=3.0), lambda: queued[0])
    assert not budget.quiet()
    queued[0] = False
    clock.advance(2.5)
    queued[0] = True
    assert not budget.quiet()  # an agent queued again: the tail of the burst is not here
    queued[0] = False
    clock.advance(2.5)
    assert not budget.quiet() and budget.settling() == 0.5
    clock.advance(0.5)
    assert budget.quiet()


def test_with_no_settling_time_a_spare_still_waits_while_agents_queue() -> None:
    queued = [True]
    budget = SpareBudget(FakeClock())
    budget.set(SpareLimits(settle_seconds=0.0), lambda: queued[0])
    assert not budget.quiet()
    queued[0] = False
    assert budget.quiet()
