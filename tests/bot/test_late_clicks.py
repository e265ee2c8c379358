"""A click that comes after its question closed (from a Slack client still showing the
buttons): the thread's record of how it closed stays as it is, and the clicker is told how
it closed. Buttons of a question nobody here knows of still close as stale. The real Bolt
app over the emulator; agents held (no CLI)."""

from __future__ import annotations

import asyncio
import contextlib
import copy
import logging
from collections.abc import Iterator
from typing import Any

import pytest

from bot.questions import CLOSED
from harness.testing.held_runtime import HeldRuntime
from harness.tools.approvals import CHOICES
from tests.bot.conftest import Rig, RigFactory, message_text

pytestmark = [pytest.mark.anyio, pytest.mark.waits]

WAIT = 10.0
JSON = dict[str, Any]
TIMED_OUT = "⌛ No answer in time; the agent went on without one."


@contextlib.contextmanager
def clicks_handled() -> Iterator[asyncio.Queue[str]]:
    """The bot's request line of each button click it finished handling, as it logs it."""
    heard: asyncio.Queue[str] = asyncio.Queue()

    class Lines(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            line = record.getMessage()
            if line.startswith("action harness_answer_"):
                heard.put_nowait(line)

    handler, log = Lines(level=logging.INFO), logging.getLogger("bot.app")
    level = log.level
    log.setLevel(logging.INFO)
    log.addHandler(handler)
    try:
        yield heard
    finally:
        log.removeHandler(handler)
        log.setLevel(level)


async def timed_out_approval(r: Rig) -> tuple[str, JSON]:
    """An approval in C1's thread that nobody decides in time; (the thread's ts, the
    question's message as it was first posted, buttons and all)."""
    sent = await r.say("<@UBOT> push the release", user="U1", channel="C1")
    await r.held.wait_started(1, WAIT)
    ts = str(sent.event["ts"])
    agent_id = r.held.started[0].agent_id
    asking = asyncio.ensure_future(
        r.orchestrator.humans.ask_human(agent_id, "Run `git push`?", CHOICES, 0.2, kind="approval")
    )

    def posted() -> JSON | None:
        found = [m for m in r.bot_messages("C1", ts) if "Run `git push`?" in message_text(m)]
        return found[0] if found and found[0].get("blocks") else None

    first = await r.slack.wait_for(posted, WAIT)
    shown_first = {**first, "blocks": list(first["blocks"])}
    _, answer = await asyncio.wait_for(asking, WAIT)
    assert answer is None
    await r.slack.wait_for(lambda: TIMED_OUT in message_text(now(r, first)), WAIT)
    return ts, shown_first


def now(r: Rig, message: JSON) -> JSON:
    found = r.slack.store.find("C1", message["ts"])
    assert found is not None
    return found


def allow_once(message: JSON) -> JSON:
    [actions] = [b for b in message["blocks"] if b["type"] == "actions"]
    button: JSON = actions["elements"][0]
    assert button["text"]["text"] == "Allow once"
    return button


async def test_a_late_click_on_a_timed_out_approval_keeps_the_threads_record_and_says_why(
    rig: RigFactory,
) -> None:
    with clicks_handled() as handled:
        async with rig(runtime=HeldRuntime()) as r:
            ts, seen = await timed_out_approval(r)
            recorded = copy.deepcopy(now(r, seen))
            button = allow_once(seen)

            # The requester's client still shows the buttons: it sends the old message.
            await r.slack.block_action(
                "U1", "C1", seen["ts"], button["action_id"], button["value"],
                thread_ts=ts, seen=seen,
            )  # fmt: skip
            line = await asyncio.wait_for(handled.get(), WAIT)

            assert "ignored: the question is closed" in line
            assert now(r, seen) == recorded  # not rewritten as "no longer waiting"
            assert TIMED_OUT in message_text(now(r, seen))
            told = [e.get("text") for e in r.slack.ephemeral("U1")]
            assert told == [f"{CLOSED} {TIMED_OUT}"]
            assert r.orchestrator.humans.pending_questions() == []


async def test_a_late_click_from_another_channel_is_not_told_how_the_question_closed(
    rig: RigFactory,
) -> None:
    with clicks_handled() as handled:
        async with rig(runtime=HeldRuntime()) as r:
            _, seen = await timed_out_approval(r)
            recorded = copy.deepcopy(now(r, seen))
            button = allow_once(seen)

            await r.slack.block_action(
                "U2", "C9", seen["ts"], button["action_id"], button["value"], seen=seen
            )
            line = await asyncio.wait_for(handled.get(), WAIT)

            assert "ignored: the question is closed" in line
            assert [e.get("text") for e in r.slack.ephemeral("U2")] == [CLOSED]
            assert now(r, seen) == recorded
