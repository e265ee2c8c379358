"""How a question closed is kept in its task's folder: a board over the same store after a
restart still says it (a late click is answered from it), and a line of that log that does
not read as one is passed over."""

from __future__ import annotations

import asyncio
import dataclasses
from pathlib import Path

import pytest

from harness.agents.questions import QUESTIONS_LOG, Answer, Question, QuestionBoard
from harness.tasks.files import FileTaskStore
from tests.harness.agents.test_questions import RecordingChannel, question

pytestmark = pytest.mark.anyio


def asked_in(slug: str, timeout: float = 5.0) -> Question:
    return dataclasses.replace(question(timeout=timeout), task_slug=slug)


async def test_a_question_that_timed_out_is_still_known_so_after_a_restart(
    tmp_path: Path,
) -> None:
    store = FileTaskStore(tmp_path / "tasks")
    task = await store.create("pick a colour")
    asked = asked_in(task.slug, timeout=0.01)
    board = QuestionBoard(log=store)
    board.add_channel(RecordingChannel())
    assert await board.ask(asked, task) is None
    await store.close()

    again = FileTaskStore(tmp_path / "tasks")
    try:
        closed = await QuestionBoard(log=again).closed(task.slug, asked.question_id)
        unknown = await QuestionBoard(log=again).closed(task.slug, "q000000")
    finally:
        await again.close()

    assert closed is not None and (closed.why, closed.answer) == ("timed out", None)
    assert unknown is None


async def test_an_answer_is_kept_with_who_gave_it_and_garbled_lines_are_passed_over(
    tmp_path: Path,
) -> None:
    store = FileTaskStore(tmp_path / "tasks")
    try:
        task = await store.create("pick a colour")
        asked = asked_in(task.slug)
        board, channel = QuestionBoard(log=store), RecordingChannel()
        board.add_channel(channel)
        asking = asyncio.ensure_future(board.ask(asked, task))
        await asyncio.wait_for(channel.arrived.wait(), 5.0)
        assert board.answer(asked.question_id, Answer("blue", "U1"))
        got = await asyncio.wait_for(asking, 5.0)
        # Lines that do not read as an outcome, written after it: passed over.
        for garbled in ({"questionId": asked.question_id, "why": "exploded"},
                        {"questionId": asked.question_id, "why": "answered",
                         "answer": {"text": 3}}, {"questionId": asked.question_id}):  # fmt: skip
            store.append_jsonl(task.slug, QUESTIONS_LOG, garbled)
        closed = await board.closed(task.slug, asked.question_id)
    finally:
        await store.close()

    assert got == Answer("blue", "U1")
    assert closed is not None and closed.why == "answered"
    assert closed.answer == Answer("blue", "U1")
