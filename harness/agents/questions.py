"""Questions from agents to the humans of a task (``ask_human``).

The harness owns the waiting; front ends own the delivery. A front end registers a
HumanChannel (the Slack bot: the task's thread; the CLI: the terminal, when one is attached),
posts each question it is handed, and passes answers back through ``QuestionBoard.answer``.
"""

from __future__ import annotations

import asyncio
import logging
import re
from dataclasses import dataclass
from typing import Any, Literal, Protocol, cast

from harness.clock import SYSTEM, Clock, timestamp
from harness.errors import HarnessError
from harness.tasks.model import Task
from harness.waits import within

logger = logging.getLogger(__name__)


QuestionKind = Literal["question", "approval"]
# How a person decides an approval: allow this call, allow such calls for the whole task, deny.
Verdict = Literal["once", "task", "deny"]


@dataclass(frozen=True)
class Question:
    question_id: str
    agent_id: str
    role: str
    task_slug: str
    text: str
    options: tuple[str, ...]
    asked_at: str
    timeout_seconds: float
    # "approval": may the agent run a tool call; only the task's requester and admins decide.
    kind: QuestionKind = "question"
    # Who asked for the task when the question was asked (None: unknown).
    requester: str | None = None


@dataclass(frozen=True)
class Answer:
    text: str
    answered_by: str
    # An approval's decision, from its button or a reply that says one (``read_verdict``);
    # None for the answer to a plain question. ``text`` is then a denial's reason, if any.
    verdict: Verdict | None = None


# Replies that decide an approval, said plainly; anything else decides nothing (a question
# back, a remark) and is no answer to an approval.
_ALLOW_ONCE = re.compile(r"(allow( once| it)?|approve|yes|y)[.!]?", re.IGNORECASE)
_ALLOW_TASK = re.compile(r"allow (it )?for (this|the) task[.!]?", re.IGNORECASE)
_DENY = re.compile(
    r"(?:no|n)[.!]?|deny[.!]?|deny\s*[:\-\u2013\u2014]?\s*(?P<reason>.+)", re.IGNORECASE | re.DOTALL
)


VERDICT_LABELS: dict[Verdict, str] = {
    "once": "Allow once",
    "task": "Allow for this task",
    "deny": "Deny",
}


def answer_for(question: Question, text: str, answered_by: str) -> Answer | None:
    """What a person's text (a button's option or a reply) answers to ``question``: a plain
    answer, or an approval's verdict; None when it decides no approval."""
    if question.kind == "approval":
        return read_verdict(text, answered_by)
    return Answer(text, answered_by)


def said(answer: Answer) -> str:
    """An answer as people read it: its text, or an approval's verdict and reason."""
    if answer.verdict is None:
        return answer.text
    label = VERDICT_LABELS[answer.verdict]
    return f"{label}: {answer.text}" if answer.text else label


def read_verdict(text: str, answered_by: str) -> Answer | None:
    """The approval decision a reply says (``allow``, ``allow for this task``, ``deny``,
    ``deny: <reason>``), as an answer; None when it says none of them."""
    said = text.strip()
    if _ALLOW_TASK.fullmatch(said):
        return Answer("", answered_by, "task")
    if _ALLOW_ONCE.fullmatch(said):
        return Answer("", answered_by, "once")
    denied = _DENY.fullmatch(said)
    if denied:
        reason = (denied.group("reason") or "").strip().lstrip(":-\u2013\u2014").strip()
        return Answer(reason, answered_by, "deny")
    return None


# Why a question closed.
CloseReason = Literal["answered", "timed out", "agent ended"]


_REASONS: tuple[CloseReason, ...] = ("answered", "timed out", "agent ended")
_VERDICTS: tuple[Verdict, ...] = ("once", "task", "deny")

# The task's log of how its questions closed: a click on a question's buttons after the
# process that asked it is gone (a restart) is still told how it closed.
QUESTIONS_LOG = "questions.jsonl"


@dataclass(frozen=True)
class ClosedQuestion:
    """How a question closed, as its task's questions log keeps it."""

    question_id: str
    why: CloseReason
    answer: Answer | None
    at: str

    def to_json(self) -> dict[str, Any]:
        answer = self.answer
        return {
            "questionId": self.question_id,
            "why": self.why,
            "at": self.at,
            "answer": None
            if answer is None
            else {"text": answer.text, "answeredBy": answer.answered_by, "verdict": answer.verdict},
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ClosedQuestion | None:
        """None for a line that does not read as one (a log is never trusted blindly)."""
        why, answer = data.get("why"), data.get("answer")
        if not isinstance(data.get("questionId"), str) or why not in _REASONS:
            return None
        read: Answer | None = None
        if isinstance(answer, dict):
            verdict = answer.get("verdict")
            if not isinstance(answer.get("text"), str) or not isinstance(
                answer.get("answeredBy"), str
            ):
                return None
            read = Answer(
                answer["text"],
                answer["answeredBy"],
                cast(Verdict, verdict) if verdict in _VERDICTS else None,
            )
        return cls(str(data["questionId"]), cast(CloseReason, why), read, str(data.get("at", "")))


class QuestionLog(Protocol):
    """Where the outcomes of a task's questions are kept (the task store's per-task logs)."""

    def append_jsonl(self, slug: str, name: str, entry: dict[str, Any]) -> None: ...

    async def read_jsonl(self, slug: str, name: str) -> list[dict[str, Any]]: ...


class NoHumanError(HarnessError):
    """No front end can reach a human for this task (e.g. a CLI run without a terminal)."""


class HumanChannel(Protocol):
    def reaches(self, task: Task) -> bool:
        """Whether this channel can put a question of this task in front of a human."""
        ...

    async def deliver(self, question: Question, task: Task) -> None:
        """Show the question (e.g. post it in the task's thread)."""
        ...

    async def settle(self, question: Question, answer: Answer | None, why: CloseReason) -> None:
        """The question is closed: answered (``answer``), timed out, or its agent ended
        before anyone answered (``answer`` None)."""
        ...


class QuestionBoard:
    def __init__(self, clock: Clock = SYSTEM, log: QuestionLog | None = None) -> None:
        self._clock = clock
        self._log = log
        self._channels: list[HumanChannel] = []
        self._pending: dict[str, tuple[Question, asyncio.Future[Answer]]] = {}

    def add_channel(self, channel: HumanChannel) -> None:
        self._channels.append(channel)

    def reachable(self, task: Task) -> bool:
        return any(c.reaches(task) for c in self._channels)

    def new_id(self) -> str:
        return "q" + self._clock.token(3)

    async def ask(self, question: Question, task: Task) -> Answer | None:
        """Deliver the question and wait for the answer; None when it times out."""
        channel = next((c for c in self._channels if c.reaches(task)), None)
        if channel is None:
            raise NoHumanError(
                f"no human can be reached for task {task.slug}",
                fix="run the task from Slack, or from a terminal (the CLI asks on the "
                "terminal when one is attached); otherwise decide yourself and say so in "
                "your result's questions",
            )
        answered: asyncio.Future[Answer] = asyncio.get_running_loop().create_future()
        self._pending[question.question_id] = (question, answered)
        answer: Answer | None = None
        why: CloseReason = "agent ended"  # a kill cancels the wait
        try:
            await channel.deliver(question, task)
            answer = await within(asyncio.shield(answered), question.timeout_seconds)
            why = "answered"
        except TimeoutError:
            why = "timed out"
        except asyncio.CancelledError:
            current = asyncio.current_task()
            if not answered.cancelled() or (current is not None and current.cancelling()):
                raise  # the asker itself was cancelled: it goes on being cancelled
            # end_agent: its agent ended while the question waited (no answer, no error)
        finally:
            self._pending.pop(question.question_id, None)
            self._keep(question, answer, why)
            await channel.settle(question, answer, why)
        return answer

    def _keep(self, question: Question, answer: Answer | None, why: CloseReason) -> None:
        """Notes how the question closed in its task's log (queued: never blocks)."""
        if self._log is None:
            return
        closed = ClosedQuestion(question.question_id, why, answer, timestamp(self._clock.now()))
        try:
            self._log.append_jsonl(question.task_slug, QUESTIONS_LOG, closed.to_json())
        except (HarnessError, OSError) as exc:  # the thread still shows it; only a restart forgets
            logger.warning("could not keep how question %s closed: %s", question.question_id, exc)

    async def closed(self, task_slug: str, question_id: str) -> ClosedQuestion | None:
        """How a question of the task closed, from its log; None when it is not there (still
        open, never asked, or the log could not be read)."""
        if self._log is None:
            return None
        try:
            entries = await self._log.read_jsonl(task_slug, QUESTIONS_LOG)
        except (HarnessError, OSError) as exc:
            logger.warning("cannot read task %s's questions: %s", task_slug, exc)
            return None
        for entry in reversed(entries):
            closed = ClosedQuestion.from_json(entry) if isinstance(entry, dict) else None
            if closed is not None and closed.question_id == question_id:
                return closed
        return None

    def get(self, question_id: str) -> Question | None:
        """An open question; None once it is closed (or was never asked)."""
        entry = self._pending.get(question_id)
        return entry[0] if entry is not None else None

    def pending(self, task_slug: str | None = None) -> list[Question]:
        """Open questions, oldest first (of one task, or all)."""
        return [q for q, _ in self._pending.values() if task_slug in (None, q.task_slug)]

    def end_agent(self, agent_id: str) -> None:
        """The agent ended (done, failed or killed): its open questions close saying so,
        whatever still waits on them."""
        for question, answered in list(self._pending.values()):
            if question.agent_id == agent_id and not answered.done():
                answered.cancel()

    def answer(self, question_id: str, answer: Answer) -> bool:
        """Answer an open question; False when it is closed or unknown."""
        entry = self._pending.get(question_id)
        if entry is None or entry[1].done():
            return False
        entry[1].set_result(answer)
        return True
