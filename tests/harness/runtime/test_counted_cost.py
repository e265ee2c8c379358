"""A run's recorded cost is at least what its sandbox's proxy counted: calls made around the
CLI, from inside its sandbox, are paid all the same."""

from __future__ import annotations

import pytest
from claude_agent_sdk import ResultMessage

from harness.runtime.agent_stream import RunTracker
from harness.runtime.binding import CountedSpend
from harness.runtime.spec import AgentControl
from harness.sandbox.model_calls import Usage


def ended(cost: float | None) -> ResultMessage:
    return ResultMessage(subtype="success", duration_ms=1, duration_api_ms=0, is_error=False,
                         num_turns=2, session_id="s", total_cost_usd=cost)  # fmt: skip


@pytest.mark.parametrize(
    ("reported", "counted", "recorded"),
    [
        (0.0003, [34.80], 34.80),  # a call the CLI never saw
        (0.05, [0.02, 0.02], 0.05),  # the CLI's own, priced alike: its figure stands
        (None, [0.4], 0.4),  # no result at all: what was counted
        (0.05, [], 0.05),
        (None, [], None),
    ],
)
def test_the_recorded_cost_is_the_clis_or_the_counted_if_more(
    reported: float | None, counted: list[float], recorded: float | None
) -> None:
    spend = CountedSpend()
    for cost in counted:
        spend.add(cost, Usage(input_tokens=10, output_tokens=5))
    tracker = RunTracker(AgentControl(), spend=spend)
    if reported is not None:
        tracker.observe(ended(reported))

    outcome = tracker.outcome(1)

    assert outcome.cost_usd == pytest.approx(recorded) if recorded else outcome.cost_usd is None
    assert spend.usage == Usage(input_tokens=10 * len(counted), output_tokens=5 * len(counted))


def test_without_a_sandbox_the_cost_is_the_clis() -> None:
    tracker = RunTracker(AgentControl())
    tracker.observe(ended(0.01))

    assert tracker.outcome(1).cost_usd == 0.01
