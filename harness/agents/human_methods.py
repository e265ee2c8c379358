"""The orchestrator's methods about the people agents ask: front ends that reach them, the
questions waiting, and answers (an approval only from the task's requester or an admin). A
part of its facade, kept in a module of its own; callers use them on the orchestrator."""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING

from harness.agents.authority import Authority
from harness.agents.pool import PoolEntry
from harness.agents.questions import Answer, HumanChannel, Question, QuestionBoard, QuestionKind
from harness.config.settings import Config
from harness.errors import HarnessError
from harness.tasks.store import Store


class HumanMethods:
    """Mixed into the orchestrator, whose parts these are."""

    _config: Config
    _store: Store
    _questions: QuestionBoard
    _authority: Authority

    if TYPE_CHECKING:  # the orchestrator's own methods these use

        def _live(self, agent_id: str) -> PoolEntry: ...

        def now(self) -> str: ...

        def waiting(
            self, agent_id: str | None, activity: str
        ) -> contextlib.AbstractAsyncContextManager[None]: ...

    def add_human_channel(self, channel: HumanChannel) -> None:
        """A front end that can put agents' questions in front of people."""
        self._questions.add_channel(channel)

    def pending_questions(self, task_slug: str | None = None) -> list[Question]:
        return self._questions.pending(task_slug)

    def answer_question(self, question_id: str, answer: Answer) -> bool:
        """False when the question is closed or unknown. An approval is decided only by the
        task's requester or an admin (NotAllowedError), and only with a verdict."""
        question = self._questions.get(question_id)
        if question is not None and question.kind == "approval":
            self._authority.check(
                answer.answered_by, question.requester, "approve what this task's agents run"
            )
            if answer.verdict is None:
                raise HarnessError(
                    f"{answer.text!r} does not decide the approval",
                    fix="answer allow, allow for this task, or deny (deny: <reason>)",
                )
        return self._questions.answer(question_id, answer)

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
        entry = self._live(agent_id)
        task = await self._store.get(entry.task_slug)
        question = Question(
            question_id=self._questions.new_id(),
            agent_id=agent_id,
            role=entry.role,
            task_slug=entry.task_slug,
            text=text,
            options=options,
            asked_at=self.now(),
            timeout_seconds=timeout or self._config.ask_timeout_seconds,
            kind=kind,
            requester=task.requester,
        )
        async with self.waiting(agent_id, activity or f"waiting for an answer: {text[:80]}"):
            answer = await self._questions.ask(question, task)
        return question, answer
