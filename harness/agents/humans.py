"""The people agents ask: the front ends that reach them, the questions waiting, and who may
decide (an approval, a Stop, a run again: only the task's requester or an admin)."""

from __future__ import annotations

from harness.agents.authority import Authority
from harness.agents.pool import AgentPool
from harness.agents.questions import (
    Answer,
    ClosedQuestion,
    HumanChannel,
    Question,
    QuestionBoard,
    QuestionKind,
)
from harness.clock import Clock, timestamp
from harness.errors import HarnessError
from harness.tasks.store import Store


class Humans:
    def __init__(
        self,
        store: Store,
        pool: AgentPool,
        authority: Authority,
        clock: Clock,
        *,
        ask_timeout_seconds: float,
    ) -> None:
        self._store = store
        self._pool = pool  # an agent that asks lends its slot while it waits
        self._authority = authority
        self._clock = clock
        self._board = QuestionBoard(clock, store)  # how questions closed outlives a restart
        self._ask_timeout_seconds = ask_timeout_seconds

    def add_human_channel(self, channel: HumanChannel) -> None:
        """A front end that can put agents' questions in front of people."""
        self._board.add_channel(channel)

    def pending_questions(self, task_slug: str | None = None) -> list[Question]:
        return self._board.pending(task_slug)

    def may_decide(self, user: str, requester: str | None) -> bool:
        """Whether ``user`` may approve, stop and run again the agents of a task asked for by
        ``requester``: they, or an admin."""
        return self._authority.may_decide(user, requester)

    def answer_question(self, question_id: str, answer: Answer) -> bool:
        """False when the question is closed or unknown. An approval is decided only by the
        task's requester or an admin (NotAllowedError), and only with a verdict."""
        question = self._board.get(question_id)
        if question is not None and question.kind == "approval":
            self._authority.check(
                answer.answered_by, question.requester, "approve what this task's agents run"
            )
            if answer.verdict is None:
                raise HarnessError(
                    f"{answer.text!r} does not decide the approval",
                    fix="answer allow, allow for this task, or deny (deny: <reason>)",
                )
        return self._board.answer(question_id, answer)

    async def ask_human(
        self,
        agent_id: str,
        text: str,
        options: tuple[str, ...],
        timeout: float | None,
        *,
        activity: str | None = None,
        kind: QuestionKind = "question",
    ) -> tuple[Question, Answer | None]:
        """Ask the task's humans and wait; the answer is None when nobody answered in time.
        NoHumanError when no front end reaches a human for the task."""
        entry = self._pool.live(agent_id)
        task = await self._store.get(entry.task_slug)
        question = Question(
            question_id=self._board.new_id(),
            agent_id=agent_id,
            role=entry.role,
            task_slug=entry.task_slug,
            text=text,
            options=options,
            asked_at=timestamp(self._clock.now()),
            timeout_seconds=timeout or self._ask_timeout_seconds,
            kind=kind,
            requester=task.requester,
        )
        async with self._pool.waiting(agent_id, activity or f"waiting for an answer: {text[:80]}"):
            answer = await self._board.ask(question, task)
        return question, answer

    async def closed_question(self, task_slug: str, question_id: str) -> ClosedQuestion | None:
        """How a question of the task closed, also one asked before a restart; None when
        it is open or unknown."""
        return await self._board.closed(task_slug, question_id)

    def end_agent(self, agent_id: str) -> None:
        """An agent that ended leaves no question open: its buttons close saying it ended."""
        self._board.end_agent(agent_id)
