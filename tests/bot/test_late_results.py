"""Where a restart's word of an agent goes, read from literals: the request an interrupted
agent without a watch was started for."""

from __future__ import annotations

from typing import Any

from bot.late_results import asked_before
from harness.tasks.model import ThreadRef

BOT = "UBOT"
STARTED = "2026-11-29T10:00:05.000Z"  # epoch 1795946405.0
AT = 1795946405.0


def kept(ts: str, *, thread_ts: str | None = None, channel: str = "D1") -> dict[str, Any]:
    event = {"type": "message", "channel": channel, "channel_type": "im", "user": "U1",
             "text": "fix the footer", "ts": ts}  # fmt: skip
    if thread_ts is not None:
        event["thread_ts"] = thread_ts
    return {"event": event, "botUserId": BOT}


def test_the_first_request_of_the_thread_kept_before_the_agent_started_is_the_one_asked() -> None:
    thread = ThreadRef("D1", "100.1")
    intake = [
        ("message:D1:101.0", {"event": "unreadable"}, AT - 12),
        ("message:D2:200.1", kept("200.1", channel="D2"), AT - 10),  # another thread
        ("message:D1:100.1", kept("100.1"), AT - 9),  # the DM that made the task
        ("message:D1:100.5", kept("100.5", thread_ts="100.1"), AT - 1),  # a follow-up behind it
        ("message:D1:100.9", kept("100.9", thread_ts="100.1"), AT + 3),  # taken on since
    ]

    assert asked_before(intake, thread, STARTED) == "100.1"
    assert asked_before(intake[3:], thread, STARTED) == "100.5"
    assert asked_before(intake[4:], thread, STARTED) is None
    assert asked_before([], thread, STARTED) is None
    assert asked_before(intake, thread, "not a time") is None
