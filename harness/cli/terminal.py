"""The terminal as a HumanChannel: ``ask_human`` from ``harness run`` asks on the terminal;
and ``confirm``, the yes/no question before a command deletes something.

Without a terminal (stdin not a TTY: CI, cron, a pipe) it reaches nobody, so ``ask_human``
fails at once with a clear error instead of hanging, and so does ``confirm``.
"""

from __future__ import annotations

import asyncio
import getpass
import sys
from collections.abc import Callable
from typing import TextIO

from harness.agents.questions import Answer, CloseReason, Question, answer_for
from harness.errors import HarnessError, NotAllowedError
from harness.tasks.model import Task

AnswerSink = Callable[[str, Answer], bool]


def terminal_user() -> str:
    """Who answers on this terminal, and asks for what the terminal starts: its login."""
    return getpass.getuser()


class TerminalChannel:
    def __init__(
        self, answer: AnswerSink, *, stdin: TextIO | None = None, out: TextIO | None = None
    ) -> None:
        self.answer = answer
        self.stdin = stdin or sys.stdin
        self.out = out or sys.stderr
        self._waiting: list[Question] = []

    def reaches(self, task: Task) -> bool:
        return self.stdin.isatty()

    async def deliver(self, question: Question, task: Task) -> None:
        lines = [f"\n[{question.agent_id}] {question.role} asks: {question.text}"]
        lines += [f"  {n}. {option}" for n, option in enumerate(question.options, 1)]
        hint = " (a number or your own words)" if question.options else ""
        lines.append(f"answer{hint}> ")
        self.out.write("\n".join(lines))
        self.out.flush()
        self._waiting.append(question)
        if len(self._waiting) == 1:
            asyncio.get_running_loop().add_reader(self.stdin.fileno(), self._on_line)

    def _on_line(self, *_: object) -> None:
        line = self.stdin.readline().strip()
        if not line or not self._waiting:
            return
        question = self._waiting[0]
        text = line
        if line.isdigit() and 1 <= int(line) <= len(question.options):
            text = question.options[int(line) - 1]
        answer = answer_for(question, text, terminal_user())
        if answer is None:  # no verdict on an approval: ask again
            self.out.write("answer allow, allow for this task or deny (deny: <reason>)> ")
            self.out.flush()
            return
        try:
            self.answer(question.question_id, answer)
        except NotAllowedError as exc:
            self.out.write(f"\n{exc}\n")
            self.out.flush()

    async def settle(self, question: Question, answer: Answer | None, why: CloseReason) -> None:
        if question in self._waiting:
            self._waiting.remove(question)
        if not self._waiting:
            asyncio.get_running_loop().remove_reader(self.stdin.fileno())
        if why == "timed out":
            self.out.write(f"\n[{question.agent_id}] no answer in time; the agent goes on.\n")
            self.out.flush()
        elif why == "agent ended":
            self.out.write(f"\n[{question.agent_id}] the agent ended; nothing to answer now.\n")
            self.out.flush()


async def confirm(question: str, *, stdin: TextIO | None = None, out: TextIO | None = None) -> bool:
    """Ask ``question`` on the terminal; True for "y" or "yes". Reads without blocking the
    event loop (Ctrl-C still stops the command). Raises when there is no terminal to ask."""
    stdin = stdin or sys.stdin
    out = out or sys.stderr
    if not stdin.isatty():
        raise HarnessError(
            "this asks for a confirmation, and standard input is not a terminal",
            fix="pass --yes to go ahead without asking",
        )
    out.write(f"{question} [y/N] ")
    out.flush()
    loop = asyncio.get_running_loop()
    line: asyncio.Future[str] = loop.create_future()

    def on_line() -> None:
        if not line.done():
            line.set_result(stdin.readline())

    loop.add_reader(stdin.fileno(), on_line)
    try:
        answer = await line
    finally:
        loop.remove_reader(stdin.fileno())
    return answer.strip().lower() in {"y", "yes"}
