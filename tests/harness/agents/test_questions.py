"""The question board: agents ask, front ends deliver, answers come back (or time out)."""

from __future__ import annotations

import asyncio
import dataclasses

import pytest

from harness.agents.questions import (
    Answer,
    CloseReason,
    NoHumanError,
    Question,
    QuestionBoard,
    answer_for,
    read_verdict,
)
from harness.tasks.model import Task

pytestmark = pytest.mark.anyio

TASK = Task(slug="t", created="2026-01-01T00:00:00Z", description="d")


class RecordingChannel:
    def __init__(self, reaches: bool = True) -> None:
        self._reaches = reaches
        self.delivered: list[Question] = []
        self.settled: list[tuple[str, Answer | None]] = []
        self.why: list[CloseReason] = []
        self.arrived = asyncio.Event()

    def reaches(self, task: Task) -> bool:
        return self._reaches

    async def deliver(self, question: Question, task: Task) -> None:
        self.delivered.append(question)
        self.arrived.set()

    async def settle(self, question: Question, answer: Answer | None, why: CloseReason) -> None:
        self.settled.append((question.question_id, answer))
        self.why.append(why)


def question(agent: str = "a111111", timeout: float = 5.0) -> Question:
    return Question(
        question_id=QuestionBoard().new_id(),
        agent_id=agent,
        role="developer",
        task_slug="t",
        text="Which colour?",
        options=("red", "blue"),
        asked_at="2026-01-01T00:00:00Z",
        timeout_seconds=timeout,
    )


async def test_an_answer_reaches_the_asking_agent_and_closes_the_question() -> None:
    board, channel = QuestionBoard(), RecordingChannel()
    board.add_channel(channel)
    q = question()
    asking = asyncio.create_task(board.ask(q, TASK))
    await asyncio.wait_for(channel.arrived.wait(), 5)
    assert board.pending("t") == [q]

    assert board.answer(q.question_id, Answer("blue", "U1"))
    assert await asyncio.wait_for(asking, 5) == Answer("blue", "U1")
    assert board.pending() == []
    assert channel.settled == [(q.question_id, Answer("blue", "U1"))]
    assert channel.why == ["answered"]
    assert not board.answer(q.question_id, Answer("red", "U2"))  # already closed


async def test_a_question_nobody_answers_times_out_with_none() -> None:
    board, channel = QuestionBoard(), RecordingChannel()
    board.add_channel(channel)
    q = question(timeout=0.05)
    assert await board.ask(q, TASK) is None
    assert channel.settled == [(q.question_id, None)]
    assert channel.why == ["timed out"]


async def test_a_question_whose_agent_ends_first_closes_saying_so_not_as_timed_out() -> None:
    board, channel = QuestionBoard(), RecordingChannel()
    board.add_channel(channel)
    q = question()
    asking = asyncio.create_task(board.ask(q, TASK))
    await asyncio.wait_for(channel.arrived.wait(), 5)

    asking.cancel()  # the agent was killed while it waited
    with pytest.raises(asyncio.CancelledError):
        await asking
    assert channel.why == ["agent ended"]
    assert board.pending() == []


async def test_an_agent_that_ends_closes_its_open_questions_saying_so() -> None:
    board, channel = QuestionBoard(), RecordingChannel()
    board.add_channel(channel)
    mine, other = question("a111111"), question("a222222")
    asking = asyncio.create_task(board.ask(mine, TASK))
    waiting = asyncio.create_task(board.ask(other, TASK))
    await asyncio.wait_for(channel.arrived.wait(), 5)
    while len(channel.delivered) < 2:
        channel.arrived.clear()
        await asyncio.wait_for(channel.arrived.wait(), 5)

    board.end_agent("a111111")

    assert await asyncio.wait_for(asking, 5) is None
    assert channel.why == ["agent ended"]
    assert board.pending() == [other]
    waiting.cancel()


async def test_without_a_reachable_human_asking_fails_at_once() -> None:
    board = QuestionBoard()
    board.add_channel(RecordingChannel(reaches=False))
    with pytest.raises(NoHumanError) as caught:
        await board.ask(question(), TASK)
    assert "terminal" in caught.value.fix


async def test_two_agents_waiting_in_one_task_are_answered_separately() -> None:
    board, channel = QuestionBoard(), RecordingChannel()
    board.add_channel(channel)
    first, second = question("a111111"), question("a222222")
    asks = [asyncio.create_task(board.ask(q, TASK)) for q in (first, second)]
    while len(channel.delivered) < 2:
        await asyncio.wait_for(channel.arrived.wait(), 5)
        channel.arrived.clear()
    assert [q.agent_id for q in board.pending("t")] == ["a111111", "a222222"]

    board.answer(second.question_id, Answer("for two", "U2"))
    board.answer(first.question_id, Answer("for one", "U1"))
    assert [a.text for a in await asyncio.gather(*asks) if a] == ["for one", "for two"]


@pytest.mark.parametrize(
    ("reply", "verdict", "reason"),
    [
        ("Allow once", "once", ""),
        ("allow", "once", ""),
        ("yes", "once", ""),
        ("Allow for this task", "task", ""),
        ("Deny", "deny", ""),
        ("no", "deny", ""),
        ("deny: not on Fridays", "deny", "not on Fridays"),
        ("deny not today", "deny", "not today"),
    ],
)
def test_a_reply_that_says_a_verdict_decides_an_approval(
    reply: str, verdict: str, reason: str
) -> None:
    assert read_verdict(reply, "U1") == Answer(reason, "U1", verdict)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "reply", ["okay wait, what does that do?", "ok", "use the staging db instead", "allowed?"]
)
def test_a_reply_that_says_no_verdict_decides_no_approval(reply: str) -> None:
    assert read_verdict(reply, "U1") is None


def test_a_plain_question_takes_any_text_and_an_approval_only_a_verdict() -> None:
    plain = question()
    approval = dataclasses.replace(plain, kind="approval")

    assert answer_for(plain, "okay wait", "U1") == Answer("okay wait", "U1")
    assert answer_for(approval, "okay wait", "U1") is None
    assert answer_for(approval, "Allow for this task", "U1") == Answer("", "U1", "task")
