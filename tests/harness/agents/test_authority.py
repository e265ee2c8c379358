"""Who may decide for a task is the core's to say, whichever front end asks: the task's
requester and the admins approve what its agents run and stop them; nobody else. The task's
caps (budget, depth) hold for every dispatch, whoever asks for it."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import AsyncIterator
from typing import Any

import pytest

from harness.agents.authority import Authority
from harness.agents.orchestrator import Orchestrator
from harness.agents.questions import Answer, CloseReason, Question
from harness.errors import HarnessError, LimitError, NotAllowedError
from harness.project import Project, build_orchestrator
from harness.runtime.spec import Approval
from harness.testing.held_runtime import HeldRuntime
from harness.tools.approvals import Approvals

pytestmark = pytest.mark.anyio

WAIT = 10.0


class Thread:
    """A human channel that shows questions and waits: answers come from the test."""

    def __init__(self) -> None:
        self.asked: asyncio.Queue[Question] = asyncio.Queue()

    def reaches(self, task: Any) -> bool:
        return True

    async def deliver(self, question: Question, task: Any) -> None:
        self.asked.put_nowait(question)

    async def settle(self, question: Question, answer: Answer | None, why: CloseReason) -> None:
        return None


@pytest.fixture
async def held(project: Project) -> AsyncIterator[tuple[Orchestrator, HeldRuntime, Thread]]:
    config = dataclasses.replace(
        project.config, slack=dataclasses.replace(project.config.slack, admins=("UADMIN",))
    )
    runtime = HeldRuntime()
    orchestrator = build_orchestrator(Project(config, project.roles), runtime)
    thread = Thread()
    orchestrator.humans.add_human_channel(thread)
    yield orchestrator, runtime, thread
    runtime.release()
    await orchestrator.shutdown()


def test_the_requester_and_the_admins_decide_and_nobody_else() -> None:
    authority = Authority(admins=("UADMIN",))

    assert authority.may_decide("U1", "U1")
    assert authority.may_decide("UADMIN", "U1")
    assert not authority.may_decide("U2", "U1")
    assert authority.may_decide("UADMIN", None) and not authority.may_decide("U1", None)
    with pytest.raises(NotAllowedError) as refused:
        authority.check("U2", "U1", "stop agent a1")
    assert refused.value.message == (
        "U2 may not stop agent a1: only the person who asked for it (U1) and the admins may"
    )


async def test_the_requester_of_a_task_and_of_each_message_is_kept(
    held: tuple[Orchestrator, HeldRuntime, Thread],
) -> None:
    orchestrator, runtime, _ = held
    runtime.release()
    first = await orchestrator.run("developer", "fix the login", requested_by="U1")
    second = await orchestrator.run("developer", "and signup", task_slug=(
        await orchestrator.tasks.task_summaries())[0].slug, requested_by="U2")  # fmt: skip

    task = await orchestrator.tasks.task((await orchestrator.tasks.task_summaries())[0].slug)
    assert task.requester == "U1"
    assert [d.requested_by for d in task.dispatches] == ["U1", "U2"]
    assert (first.requested_by, second.requested_by) == ("U1", "U2")


async def test_an_approval_by_someone_else_is_refused_by_the_core_and_stays_open(
    held: tuple[Orchestrator, HeldRuntime, Thread],
) -> None:
    orchestrator, runtime, thread = held
    handle = await orchestrator.draft("developer", "deploy it", requested_by="U1")
    await runtime.wait_started(1)
    approving = asyncio.ensure_future(
        Approvals(orchestrator.services).approve(
            handle.agent_id, "Bash", {"command": "git push origin main"}
        )
    )
    question = await asyncio.wait_for(thread.asked.get(), WAIT)

    with pytest.raises(NotAllowedError):
        orchestrator.humans.answer_question(question.question_id, Answer("", "U2", "once"))
    with pytest.raises(HarnessError, match="does not decide the approval"):
        orchestrator.humans.answer_question(question.question_id, Answer("okay wait", "U1"))
    assert not approving.done() and orchestrator.humans.pending_questions() == [question]

    assert orchestrator.humans.answer_question(question.question_id, Answer("", "UADMIN", "once"))
    assert await asyncio.wait_for(approving, WAIT) == Approval(True, "")


async def test_only_the_requester_or_an_admin_stops_an_agent_the_harness_itself_always(
    held: tuple[Orchestrator, HeldRuntime, Thread],
) -> None:
    orchestrator, runtime, _ = held
    mine = await orchestrator.draft("developer", "one", requested_by="U1")
    other = await orchestrator.draft("developer", "two", requested_by="U1")
    third = await orchestrator.draft("developer", "three", requested_by="U1")
    await runtime.wait_started(3)

    with pytest.raises(NotAllowedError):
        await orchestrator.kill(mine.agent_id, "no", by="U2")
    assert orchestrator.agent(mine.agent_id) is not None
    assert await orchestrator.kill(mine.agent_id, "mine", by="U1")
    assert await orchestrator.kill(other.agent_id, "admin", by="UADMIN")
    assert await orchestrator.kill(third.agent_id, "shutting down")  # the harness itself
    records = [await orchestrator.wait(h.agent_id, WAIT) for h in (mine, other, third)]
    assert [r.status for r in records] == ["killed"] * 3


async def test_a_task_over_its_budget_starts_no_agent_whoever_asks(project: Project) -> None:
    config = dataclasses.replace(
        project.config, mcp=dataclasses.replace(project.config.mcp, task_budget_usd=0.005)
    )
    runtime = HeldRuntime()
    runtime.release()
    orchestrator = build_orchestrator(Project(config, project.roles), runtime)
    first = await orchestrator.run("developer", "fix it", requested_by="U1")  # spends $0.01
    slug = (await orchestrator.tasks.task_summaries())[0].slug

    with pytest.raises(LimitError) as over:
        await orchestrator.draft("developer", "more", task_slug=slug, requested_by="U1")

    assert over.value.code == "BUDGET_EXCEEDED"
    assert over.value.message == f"task {slug} has spent $0.0100 of its $0.01 budget"
    assert "mcp.taskBudgetUsd" in over.value.fix
    assert [d.agent_id for d in (await orchestrator.tasks.task(slug)).dispatches] == [
        first.agent_id
    ]
    assert len(runtime.started) == 1
    await orchestrator.shutdown()


async def test_agents_at_once_cannot_spend_past_the_budget_between_them(
    project: Project,
) -> None:
    # Each agent reserves what it may spend (its role's maxBudgetUsd, $3 for the developer,
    # within what is left) while it lives, and its run is capped there.
    config = dataclasses.replace(
        project.config, mcp=dataclasses.replace(project.config.mcp, task_budget_usd=5.0)
    )
    runtime = HeldRuntime()
    orchestrator = build_orchestrator(Project(config, project.roles), runtime)
    first = await orchestrator.draft("developer", "one", requested_by="U1")
    second = await orchestrator.draft("developer", "two", task_slug=first.task_slug)

    with pytest.raises(LimitError) as over:
        await orchestrator.draft("developer", "three", task_slug=first.task_slug)

    assert over.value.message == (
        f"task {first.task_slug} has spent $0.0000 and its 2 live agent(s) may spend $5.00 "
        "of its $5.00 budget"
    )
    task = await orchestrator.tasks.task(first.task_slug)
    assert [d.budget_usd for d in task.dispatches] == [3.0, 2.0]
    runtime.release()  # (writers take turns in a task: the second starts after the first)
    await orchestrator.wait(first.agent_id, WAIT)
    await orchestrator.wait(second.agent_id, WAIT)
    assert [spec.role.max_budget_usd for spec in runtime.started] == [3.0, 2.0]
    # Both ended having spent $0.01 each: the budget is free again, less what they spent.
    third = await orchestrator.draft("developer", "three", task_slug=first.task_slug)
    assert (await orchestrator.record(third.agent_id)).budget_usd == 3.0
    await orchestrator.shutdown()
