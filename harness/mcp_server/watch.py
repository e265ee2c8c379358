"""What an MCP client waiting on an agent is told while it waits: the agent's events (it
started, its progress) and the questions it asks, as lines for progress notifications.

``HumanDesk`` is the MCP server's human channel: questions of agents it runs wait there
until a client answers them (``answer_question``); it reaches every task, so an approval is
never refused for want of a human while a client may still answer it.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator

from harness.agents.events import AgentEvent
from harness.agents.questions import Answer, CloseReason, Question
from harness.tasks.model import Task


class AgentWatch:
    def __init__(self) -> None:
        self._followers: dict[str, set[asyncio.Queue[str]]] = {}

    @contextlib.contextmanager
    def follow(self, agent_id: str) -> Iterator[asyncio.Queue[str]]:
        """A queue of lines about ``agent_id`` for as long as the block runs."""
        queue: asyncio.Queue[str] = asyncio.Queue()
        self._followers.setdefault(agent_id, set()).add(queue)
        try:
            yield queue
        finally:
            followers = self._followers.get(agent_id, set())
            followers.discard(queue)
            if not followers:
                self._followers.pop(agent_id, None)

    def tell(self, agent_id: str, line: str) -> None:
        for queue in self._followers.get(agent_id, ()):
            queue.put_nowait(line)

    def on_event(self, event: AgentEvent) -> None:
        record = event.record
        if record.parent_id is not None:  # who waits on a coordinator hears of its team
            self.tell(record.parent_id, f"its {record.role} {record.agent_id}: {record.status}")
        if event.kind == "started":
            self.tell(record.agent_id, f"{record.role} {record.agent_id} started")
        elif event.kind == "progress" and record.progress is not None:
            percent = record.progress.percent
            done = f" ({percent:g}%)" if percent is not None else ""
            self.tell(record.agent_id, f"{record.role}{done}: {record.progress.message}")


def question_line(question: Question) -> str:
    what = "approval" if question.kind == "approval" else "an answer"
    return (
        f"waiting for {what} ({question.question_id}): {question.text[:300]} "
        "(answer it with answer_question)"
    )


class HumanDesk:
    def __init__(self, watch: AgentWatch) -> None:
        self._watch = watch

    def reaches(self, task: Task) -> bool:
        return True

    async def deliver(self, question: Question, task: Task) -> None:
        self._watch.tell(question.agent_id, question_line(question))

    async def settle(self, question: Question, answer: Answer | None, why: CloseReason) -> None:
        if why != "answered":
            self._watch.tell(question.agent_id, f"question {question.question_id} {why}")
