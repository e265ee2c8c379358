"""The spend limits where every agent starts (``Orchestrator.draft``): a person, a channel
or a routine over a limit gets no agent, whoever asks (Slack, a follow-up, an agent drafting
one, the MCP server); agents drafted at once never pass a limit between them; an admin can
lift the limits for one task; costs a scripted model reports never count."""

from __future__ import annotations

import asyncio
import dataclasses
from datetime import UTC, datetime

import pytest

from harness.agents.orchestrator import Orchestrator
from harness.agents.spend_limits import SpendLimitError
from harness.config.limits_schema import LimitSettings, LimitWindows
from harness.project import Project, build_orchestrator
from harness.tasks.model import ThreadRef
from harness.testing.clock import FakeClock
from harness.testing.held_runtime import HeldRuntime
from harness.tools.gateway import HarnessTools

pytestmark = pytest.mark.anyio

WAIT = 10.0
NOON = datetime(2026, 11, 28, 12, 0, tzinfo=UTC)
NONE = LimitWindows()  # no limit


def limited(
    project: Project, runtime: HeldRuntime, clock: FakeClock, *, simulated: bool = False,
    per_person: LimitWindows = NONE, per_channel: LimitWindows = NONE,
) -> Orchestrator:  # fmt: skip
    limits = LimitSettings(per_person=per_person, per_channel=per_channel)
    config = dataclasses.replace(project.config, limits=limits)
    return build_orchestrator(
        Project(config, project.roles), runtime, clock=clock, simulated_costs=simulated
    )


async def test_a_person_over_their_daily_limit_gets_no_agent_while_another_person_does(
    project: Project,
) -> None:
    runtime = HeldRuntime()
    runtime.release()  # each agent spends $0.01
    clock = FakeClock(NOON)
    orchestrator = limited(project, runtime, clock, per_person=LimitWindows(day=0.01))
    first = await orchestrator.run("developer", "fix it", requested_by="U1")
    assert first.budget_usd == 0.01  # its allowance: all the day's limit

    with pytest.raises(SpendLimitError) as over:
        await orchestrator.draft("developer", "more", requested_by="U1")

    assert over.value.message == (
        "the daily limit of U1 ($0.01, limits.perPersonUsd.day) is reached: $0.01 spent today "
        "(UTC); it resets at 2026-11-29 00:00 UTC"
    )
    other = await orchestrator.run("developer", "fix that", requested_by="U2")
    assert other.status == "completed"
    assert len(runtime.started) == 2  # nothing started for U1's second request
    clock.set(datetime(2026, 11, 29, 0, 0, tzinfo=UTC))  # a new UTC day
    assert (await orchestrator.run("developer", "again", requested_by="U1")).status == "completed"
    await orchestrator.shutdown()


async def test_agents_drafted_at_once_never_pass_a_limit_between_them(project: Project) -> None:
    # The developer's maxBudgetUsd is $3: under a $5 day, the first gets $3, the second $2
    # and the third nothing, though all three are asked for in the same instant.
    runtime = HeldRuntime()
    orchestrator = limited(project, runtime, FakeClock(NOON), per_person=LimitWindows(day=5))
    tries = [orchestrator.draft("developer", f"job {n}", requested_by="U1") for n in range(3)]

    outcomes = await asyncio.gather(*tries, return_exceptions=True)

    refused = [o for o in outcomes if isinstance(o, BaseException)]
    assert len(refused) == 1 and isinstance(refused[0], SpendLimitError)
    assert "live agents hold $5.00" in refused[0].message
    started = [o for o in outcomes if not isinstance(o, BaseException)]
    budgets = sorted([(await orchestrator.record(h.agent_id)).budget_usd or 0 for h in started])
    assert budgets == [2.0, 3.0]
    runtime.release()
    await orchestrator.shutdown()


async def test_a_follow_up_racing_a_drafting_agent_in_a_channel_cannot_both_pass(
    project: Project,
) -> None:
    runtime = HeldRuntime()
    orchestrator = limited(project, runtime, FakeClock(NOON), per_channel=LimitWindows(month=4))
    task = await orchestrator.tasks.create_task("lead", ThreadRef("C1", "1.1"), requester="U1")
    slug = task.slug
    lead = await orchestrator.draft("developer", "lead", task_slug=slug, requested_by="U1")
    await runtime.wait_started(1)

    follow_up = orchestrator.draft("developer", "and this", task_slug=slug, requested_by="U2")
    drafted = orchestrator.draft("developer", "part", task_slug=slug, parent_id=lead.agent_id)
    outcomes = await asyncio.gather(follow_up, drafted, return_exceptions=True)

    refused = [o for o in outcomes if isinstance(o, SpendLimitError)]
    assert len(refused) == 1, outcomes
    assert refused[0].limit.config_key == "limits.perChannelUsd.month"
    assert sum((d.budget_usd or 0) for d in (await orchestrator.tasks.task(slug)).dispatches) == 4
    runtime.release()
    await orchestrator.shutdown()


async def test_an_admin_raising_the_limits_for_a_task_lets_it_go_on(project: Project) -> None:
    runtime = HeldRuntime()
    runtime.release()
    orchestrator = limited(project, runtime, FakeClock(NOON), per_person=LimitWindows(day=0.01))
    slug = (await orchestrator.draft("developer", "fix it", requested_by="U1")).task_slug
    await orchestrator.wait((await orchestrator.tasks.task(slug)).dispatches[0].agent_id, WAIT)
    with pytest.raises(SpendLimitError):
        await orchestrator.draft("developer", "more", task_slug=slug, requested_by="U1")

    await orchestrator.tasks.raise_limits(slug, "UADMIN")

    more = await orchestrator.run("developer", "more", task_slug=slug, requested_by="U1")
    assert more.status == "completed" and more.budget_usd == 3.0  # its role's cap alone
    with pytest.raises(SpendLimitError):  # other tasks of U1 are still held to it
        await orchestrator.draft("developer", "elsewhere", requested_by="U1")
    await orchestrator.shutdown()


async def test_simulated_costs_never_count_against_a_limit(project: Project) -> None:
    runtime = HeldRuntime()
    runtime.release()
    orchestrator = limited(
        project, runtime, FakeClock(NOON), simulated=True, per_person=LimitWindows(day=0.01)
    )
    for n in range(3):
        done = await orchestrator.run("developer", f"job {n}", requested_by="U1")
        assert done.status == "completed" and done.cost_simulated
    await orchestrator.shutdown()


async def test_an_agents_draft_over_a_limit_gets_the_tool_error_naming_it(project: Project) -> None:
    runtime = HeldRuntime()
    runtime.release()
    orchestrator = limited(project, runtime, FakeClock(NOON), per_person=LimitWindows(day=0.01))
    first = await orchestrator.run("developer", "fix it", requested_by="U1")
    slug = (await orchestrator.tasks.task_summaries())[0].slug

    reply = await HarnessTools(orchestrator.services).invoke(
        "draft_agent", {"role": "developer", "prompt": "more", "taskSlug": slug}, None
    )

    assert reply.is_error
    error = reply.payload["error"]
    assert error["code"] == "SPEND_LIMIT_EXCEEDED"
    assert "the daily limit of U1" in error["message"]  # a drafted agent: its requester pays
    assert [d.agent_id for d in (await orchestrator.tasks.task(slug)).dispatches] == [
        first.agent_id
    ]
    await orchestrator.shutdown()
