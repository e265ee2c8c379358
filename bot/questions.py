"""Agents asking the people of a thread (``ask_human``): the Slack side of the question board.

A question is posted in the task's thread (a button per option); a reply in the thread or a
button press answers it. With several agents waiting in one thread, the question says who
asks and a reply can start with the agent's id (``a1b2c3: yes``) to pick which one; otherwise
the oldest open question gets the answer.
"""

from __future__ import annotations

import logging
import re
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, cast

from bot.blocks import (
    SECTION_LIMIT,
    Block,
    SlackMessage,
    context_block,
    escape,
    mention,
    section_block,
)
from bot.poster import Poster
from harness.agents.orchestrator import Orchestrator
from harness.agents.questions import Answer, ClosedQuestion, CloseReason, Question, said
from harness.errors import HarnessError, NotAllowedError
from harness.tasks.model import Task, ThreadRef

logger = logging.getLogger(__name__)

ACTION_PREFIX = "harness_answer_"
ACTION_PATTERN = re.compile(rf"^{ACTION_PREFIX}\d+$")
_INDEX = re.compile(r"[0-9]{1,3}")
_ADDRESSED = re.compile(r"^\s*@?(a[0-9a-f]{6,16})\b[\s:,.-]*", re.IGNORECASE)


# Closed questions whose outcome a late click is told (older ones read as stale buttons).
SETTLED_KEPT = 1000

CUT_NOTE = "\n… _(cut here: the whole question follows as a file in this thread)_"


def _asked(question: Question) -> str:
    """Who asks and the question, as the message's section shows it (escaped mrkdwn)."""
    who = f"*{question.role}* (agent `{question.agent_id}`) asks:"
    return f"❓ {who}\n{escape(question.text)}"


def question_file(question: Question) -> str | None:
    """The whole question as a file's text, when the message cannot hold it; else None."""
    if len(_asked(question)) <= SECTION_LIMIT:
        return None
    return f"{question.role} (agent {question.agent_id}) asks:\n{question.text}\n"


def question_message(question: Question) -> SlackMessage:
    """The question as Block Kit: who asks, the question, a button per option."""
    how = (
        "Pick an answer, or reply in this thread."
        if question.options
        else "Reply in this thread to answer"
    )
    how += f" (start with `{question.agent_id}:` if several agents are waiting)."
    shown = _asked(question)
    if len(shown) > SECTION_LIMIT:  # what does not fit follows whole, as a file
        shown = shown[: SECTION_LIMIT - len(CUT_NOTE)] + CUT_NOTE
    blocks: list[Block] = [section_block(shown)]
    if question.options:
        blocks.append(
            {
                "type": "actions",
                "block_id": f"question_{question.question_id}",
                "elements": [
                    {
                        "type": "button",
                        "action_id": f"{ACTION_PREFIX}{n}",
                        "text": {"type": "plain_text", "text": option[:75]},
                        "value": f"{question.question_id}|{n}",
                    }
                    for n, option in enumerate(question.options)
                ],
            }
        )
    blocks.append(context_block(how))
    text = f"{question.role} (agent {question.agent_id}) asks: {question.text}"[:SECTION_LIMIT]
    return {"text": text, "blocks": blocks}


def outcome_line(answer: Answer | None, why: CloseReason) -> str:
    """How a question closed, in one line: the answer and who gave it, that nobody answered
    in time, or that its agent ended first (killed, failed, or the bot stopped)."""
    if answer is not None:
        return f"💬 {mention(answer.answered_by)} answered: {escape(said(answer))}"
    if why == "agent ended":
        return "⏹ The agent ended before anyone answered; there is nothing to decide now."
    return "⌛ No answer in time; the agent went on without one."


def settled_message(question: Question, answer: Answer | None, why: CloseReason) -> SlackMessage:
    """The question once closed, with its outcome (``outcome_line``)."""
    asked = f"❓ *{question.role}* (agent `{question.agent_id}`) asked: {escape(question.text)}"
    text = f"{asked}\n{outcome_line(answer, why)}"
    return {"text": text, "blocks": [section_block(text)]}


CLOSED = "This question is already closed."


def closed_notice(outcome: str | None) -> str:
    """What a click on a closed question tells the clicker: how it closed, when known."""
    return f"{CLOSED} {outcome}" if outcome else CLOSED


STALE = "Closed: its agent is no longer waiting (it ended, or the bot restarted since)."


def closed_buttons(message: Mapping[str, Any]) -> SlackMessage | None:
    """A question message whose buttons outlived their question (a click found it closed):
    the same text without the buttons, saying why; None when it has no buttons left."""
    blocks = [b for b in message.get("blocks") or [] if isinstance(b, dict)]
    if not any(b.get("type") == "actions" for b in blocks):
        return None
    kept = [b for b in blocks if b.get("type") == "section"]  # the question, not how to answer
    text = str(message.get("text") or "")
    # The message's own blocks, as Slack sent them back: passed on as they are.
    blocks_out = [*cast(list[Block], kept), context_block(STALE)]
    return {"text": f"{text}\n{STALE}", "blocks": blocks_out}


def parse_button_value(value: str, pending: Sequence[Question]) -> tuple[Question, str] | None:
    """A button's ``question_id|index`` as (the open question, the option's text)."""
    question_id, _, index = value.partition("|")
    question = next((q for q in pending if q.question_id == question_id), None)
    # ASCII digits only: str.isdigit() also takes "²", which int() refuses.
    if question is None or not _INDEX.fullmatch(index) or int(index) >= len(question.options):
        return None
    return question, question.options[int(index)]


def approval_refusal(refused: NotAllowedError) -> str:
    """What someone who may not decide an approval is told (the core decided who may)."""
    who = f"<@{refused.requester}>" if refused.requester else "the person who asked"
    return f"Only {who} and the bot's admins can approve what this task's agents run."


def names_an_agent(reply: str) -> bool:
    """Whether a reply starts with an agent's id (``a1b2c3d: blue``): addressed to one
    agent's question on purpose."""
    return _ADDRESSED.match(reply) is not None


def pick_question(pending: Sequence[Question], reply: str) -> tuple[Question, str] | None:
    """Which open question a thread reply answers, and the answer's text."""
    if not pending:
        return None
    addressed = _ADDRESSED.match(reply)
    if addressed:
        agent_id = addressed.group(1).lower()
        for question in pending:
            if question.agent_id == agent_id:
                return question, reply[addressed.end() :].strip() or reply.strip()
    return pending[0], reply.strip()


# How a question of a thread's task closed, as the task keeps it (None: not known there).
ClosedLookup = Callable[[ThreadRef, str], Awaitable[ClosedQuestion | None]]


def closed_in_task(orchestrator: Orchestrator) -> ClosedLookup:
    """How a question closed, from the log of the clicked thread's own task."""

    async def lookup(thread: ThreadRef, question_id: str) -> ClosedQuestion | None:
        try:
            task = await orchestrator.tasks.find_task(thread)
        except HarnessError as exc:
            logger.warning("no task to look question %s up in: %s", question_id, exc)
            return None
        return await orchestrator.humans.closed_question(task.slug, question_id) if task else None

    return lookup


class SlackHumanChannel:
    """Posts questions of thread-bound tasks in their thread (a HumanChannel)."""

    def __init__(self, poster: Poster, closed: ClosedLookup | None = None) -> None:
        self.poster = poster
        self._closed = closed
        self._posted: dict[str, tuple[ThreadRef, str]] = {}
        # How the newest closed questions closed: a late click (from a client still showing
        # the buttons) is told so and leaves the thread's record of it as it is.
        self._settled: OrderedDict[str, tuple[ThreadRef, str]] = OrderedDict()
        # Told when a question opens or closes (the home tabs list what waits on people).
        self.on_change: Callable[[], None] = lambda: None

    def reaches(self, task: Task) -> bool:
        return task.thread is not None

    async def deliver(self, question: Question, task: Task) -> None:
        assert task.thread is not None
        # An agent waits on this question: worth a few tries when Slack has a hiccup.
        ts = await self.poster.post(task.thread, question_message(question), attempts=4)
        if ts is not None:
            self._posted[question.question_id] = (task.thread, ts)
        whole = question_file(question)
        if whole is not None:  # nobody decides on what they were not shown
            await self.poster.upload(
                task.thread,
                f"question-{question.question_id}.txt",
                whole,
                title=f"{question.role} {question.agent_id}: the whole question",
                comment="The whole question, too long for a message.",
            )
        self.on_change()

    async def outcome(self, button_value: str, clicked_in: ThreadRef) -> str | None:
        """How the question a button's ``question_id|index`` names closed, to a click in its
        own thread (from memory, else from the log of the thread's task, which outlives a
        restart); None when it is still open or unknown there, or the click came from
        elsewhere (nothing of a thread leaks out)."""
        question_id = button_value.partition("|")[0]
        settled = self._settled.get(question_id)
        if settled is not None:
            return settled[1] if settled[0] == clicked_in else None
        kept = await self._closed(clicked_in, question_id) if self._closed else None
        return outcome_line(kept.answer, kept.why) if kept is not None else None

    async def settle(self, question: Question, answer: Answer | None, why: CloseReason) -> None:
        posted = self._posted.pop(question.question_id, None)
        if posted is not None:
            # Kept before any await: no click finds the question neither open nor closed.
            self._settled[question.question_id] = (posted[0], outcome_line(answer, why))
            while len(self._settled) > SETTLED_KEPT:
                self._settled.popitem(last=False)
        self.on_change()
        if posted is not None:
            thread, ts = posted
            await self.poster.update(thread.channel, ts, settled_message(question, answer, why))
