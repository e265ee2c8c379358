"""A task's status and cost, derived from its dispatches: pure functions over literals."""

from __future__ import annotations

import pytest

from harness.tasks.model import task_cost, task_status
from harness.testing.records import make_record


def test_a_task_no_agent_worked_on_is_new_and_cost_nothing_known() -> None:
    assert task_status(()) == "new"
    assert task_cost(()) is None


def test_a_task_is_running_while_any_agent_runs_even_after_others_ended() -> None:
    dispatches = (
        make_record("pm", status="running"),
        make_record("dev", status="completed", parent_id="pm"),
        make_record("old", status="queued"),
    )

    assert task_status(dispatches) == "running"


def test_a_task_whose_only_unfinished_agents_wait_for_a_slot_is_queued() -> None:
    dispatches = (make_record("a", status="completed"), make_record("b", status="queued"))

    assert task_status(dispatches) == "queued"


@pytest.mark.parametrize("status", ["completed", "failed", "killed", "interrupted"])
def test_an_ended_task_has_the_status_of_the_latest_request_a_person_made(status: str) -> None:
    dispatches = (
        make_record("first", status="failed"),
        make_record("pm", status=status),
        # Drafted by the analyst, it ended last; the analyst's result reports on it.
        make_record("dev", status="killed", parent_id="pm"),
    )

    assert task_status(dispatches) == status


def test_a_task_of_drafted_agents_only_takes_the_last_ones_status() -> None:
    dispatches = (
        make_record("a", status="completed", parent_id="gone"),
        make_record("b", status="failed", parent_id="gone"),
    )

    assert task_status(dispatches) == "failed"


def test_the_cost_adds_up_what_the_agents_reported_and_skips_the_unknown() -> None:
    dispatches = (
        make_record("a", status="completed", cost_usd=0.125),
        make_record("b", status="killed"),
        make_record("c", status="completed", cost_usd=0.5),
    )

    assert task_cost(dispatches) == 0.625
    assert task_cost((make_record("a", status="killed"),)) is None
