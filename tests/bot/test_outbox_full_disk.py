"""The outbox when its ledger refuses writes (the disk under it is full) and when Slack does a
post but its answer is lost: what a thread is owed still arrives, once, a step done is never
repeated, and what the ledger must learn (the watch ended) it learns once the disk takes
writes again. The real outbox and ledger file over the Slack emulator."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Literal

import aiohttp
import pytest

from bot.outbox import AgentRef, Outbox
from bot.poster import Poster, SlackClient
from bot.testing.slack_emulator import SlackEmulator
from harness.tasks.ledger import SqliteLedger
from harness.tasks.model import ThreadRef
from tests.bot.conftest import BOT_TOKEN, WAIT, message_text

pytestmark = pytest.mark.anyio


async def refuse_writes(ledger: SqliteLedger, refuse: bool = True) -> None:
    """The ledger's file refuses every write (SQLite's read-only mode on its connection, as a
    disk that refuses writes), or takes them again."""
    mode = 1 if refuse else 0
    await ledger._call(lambda: ledger._conn().execute(f"PRAGMA query_only = {mode}"), writes=False)


async def until(check: Callable[[], Awaitable[bool]], timeout: float = WAIT) -> None:
    """Polls ``check`` (bounded) until it holds."""
    deadline = asyncio.get_running_loop().time() + timeout
    while not await check():
        assert asyncio.get_running_loop().time() < deadline, "not so in time"
        await asyncio.sleep(0.02)


@pytest.fixture
async def client(slack: SlackEmulator) -> AsyncIterator[SlackClient]:
    # A call Slack never answers is given up on after a second (then tried again).
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=1.0)) as session:
        yield SlackClient(token=BOT_TOKEN, base_url=slack.api_url, session=session)


@pytest.fixture
async def ledger(tmp_path: Path) -> AsyncIterator[SqliteLedger]:
    opened = await SqliteLedger.open(tmp_path / ".ledger.sqlite3")
    yield opened
    await opened.close()


@pytest.fixture
async def outbox(ledger: SqliteLedger, client: SlackClient) -> AsyncIterator[Outbox]:
    async def read_diff(_slug: str, _agent: str) -> str | None:
        return None

    async def on_given_up(_agent: AgentRef, _reason: str) -> None:
        return None

    box = Outbox(ledger, client, Poster(client), read_diff=read_diff, on_given_up=on_given_up,
                 max_delay=0.1)  # fmt: skip
    yield box  # started by the test
    await box.stop(1.0)


async def a_thread(slack: SlackEmulator) -> ThreadRef:
    """A person's message in a DM (stored: no bot listens for its event here)."""
    asked = slack.store.add("D1", {"user": "U1", "text": "fix the footer"})
    return ThreadRef("D1", asked["ts"])


def said(slack: SlackEmulator, thread: ThreadRef, text: str) -> list[str]:
    messages = slack.thread(thread.channel, thread.thread_ts)
    return [message_text(m) for m in messages if m.get("bot_id") and text in message_text(m)]


async def test_a_result_the_ledger_cannot_take_is_delivered_once_and_its_watch_ends_later(
    slack: SlackEmulator, ledger: SqliteLedger, outbox: Outbox
) -> None:
    thread = await a_thread(slack)
    await ledger.watch("a1", {"thread": [thread.channel, thread.thread_ts]})
    await refuse_writes(ledger)
    outbox.start()

    await outbox.owe(
        thread,
        [{"op": "post", "message": "✅ the footer is fixed"},
         {"op": "react", "channel": thread.channel, "ts": thread.thread_ts,
          "name": "white_check_mark"}],
        settles="a1",
    )  # fmt: skip
    await outbox.settled(WAIT)

    assert said(slack, thread, "the footer is fixed") == ["✅ the footer is fixed"]
    assert "white_check_mark" in slack.reactions(thread.channel, thread.thread_ts)
    assert ledger.problem is not None
    # The watch stays while the disk refuses to end it: a stop now would settle it again.
    assert [agent for agent, _ in await ledger.watches()] == ["a1"]

    await refuse_writes(ledger, refuse=False)
    await until(lambda: _no_watches(ledger))
    assert ledger.problem is None
    assert len(said(slack, thread, "the footer is fixed")) == 1
    assert await ledger.pending() == []


async def _no_watches(ledger: SqliteLedger) -> bool:
    return not await ledger.watches()


async def test_a_step_done_while_the_ledger_refuses_to_note_it_is_not_done_again(
    slack: SlackEmulator, ledger: SqliteLedger, outbox: Outbox
) -> None:
    thread = await a_thread(slack)
    await outbox.owe(
        thread,
        [{"op": "post", "message": "✅ the footer is fixed"},
         {"op": "react", "channel": thread.channel, "ts": thread.thread_ts,
          "name": "white_check_mark"}],
    )  # fmt: skip
    # Stored; then the disk refuses to note how far delivery got, and a step fails once.
    await refuse_writes(ledger)
    slack.faults.fail_next("reactions.add", status=500)
    outbox.start()
    await outbox.settled(WAIT)

    assert len(said(slack, thread, "the footer is fixed")) == 1
    assert "white_check_mark" in slack.reactions(thread.channel, thread.thread_ts)
    await refuse_writes(ledger, refuse=False)
    await until(lambda: _nothing_pending(ledger))
    assert len(said(slack, thread, "the footer is fixed")) == 1


async def _nothing_pending(ledger: SqliteLedger) -> bool:
    return not await ledger.pending() and ledger.problem is None


@pytest.mark.parametrize("lost", ["reset", "hang"])
async def test_a_post_slack_made_whose_answer_was_lost_is_not_made_again_by_the_outbox(
    slack: SlackEmulator, outbox: Outbox, lost: Literal["reset", "hang"]
) -> None:
    thread = await a_thread(slack)
    slack.faults.apply_then_drop("chat.postMessage", how=lost)
    outbox.start()

    await outbox.owe(thread, [{"op": "post", "message": "✅ the footer is fixed"}])
    await outbox.settled(WAIT)

    assert said(slack, thread, "the footer is fixed") == ["✅ the footer is fixed"]


async def test_a_post_slack_made_whose_answer_was_lost_is_not_made_again_by_the_poster(
    slack: SlackEmulator, client: SlackClient
) -> None:
    thread = await a_thread(slack)
    slack.faults.apply_then_drop("chat.postMessage")

    ts = await Poster(client).post(thread, "Which repository?")

    [posted] = [m for m in slack.thread("D1", thread.thread_ts) if m.get("bot_id")]
    assert posted["ts"] == ts
    assert message_text(posted) == "Which repository?"


async def test_a_result_owed_again_after_a_restart_that_had_posted_it_is_not_posted_twice(
    slack: SlackEmulator, outbox: Outbox
) -> None:
    thread = await a_thread(slack)
    working = {"text": "developer is working…", "bot_id": slack.identity.bot_id}
    status = slack.store.add("D1", {**working, "thread_ts": thread.thread_ts})
    outbox.start()
    # The bot before: the status message replaced by the result (its watch outlived it).
    await outbox.owe(thread, [{"op": "delete", "ts": status["ts"]},
                              {"op": "post", "message": "✅ the footer is fixed"}],
                     key="a1.completed")  # fmt: skip
    await outbox.settled(WAIT)

    # The next start settles the same watch: it edits the (gone) status message in place.
    await outbox.owe(thread, [{"op": "update", "ts": status["ts"],
                               "message": "✅ the footer is fixed"}],
                     key="a1.completed", recheck=True)  # fmt: skip
    await outbox.settled(WAIT)

    assert said(slack, thread, "the footer is fixed") == ["✅ the footer is fixed"]
