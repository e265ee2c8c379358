"""What a streamed reply is made of: task lines of drafted agents, feedback buttons and their
values, and the cut near Slack's size limit (pure parts; tests/bot/test_slack_surfaces.py
streams for real)."""

from __future__ import annotations

from slack_sdk.web.async_client import AsyncWebClient

from bot.streaming import (
    STREAM_TEXT_LIMIT,
    ReplyStream,
    TaskLine,
    parse_feedback,
    task_status,
    task_title,
    with_feedback,
)
from harness.tasks.model import ThreadRef


def test_a_drafted_agents_dispatch_status_becomes_its_task_lines_status() -> None:
    assert [task_status(s) for s in ("queued", "running", "completed")] == [
        "pending",
        "in_progress",
        "complete",
    ]
    assert {task_status(s) for s in ("failed", "killed", "interrupted")} == {"error"}
    line = TaskLine("a2", task_title("developer", "Build   the\nsettings page"), "pending")
    assert line.chunk() == {
        "type": "task_update",
        "id": "a2",
        "title": "developer: Build the settings page",
        "status": "pending",
    }


def test_feedback_buttons_name_the_agent_and_task_and_forged_values_are_refused() -> None:
    message = with_feedback({"text": "done", "blocks": []}, "the-task", "a1b2")
    [block] = message["blocks"]
    assert block["type"] == "context_actions"
    [buttons] = block["elements"]
    assert buttons["positive_button"]["value"] == "good:a1b2:the-task"
    assert buttons["negative_button"]["value"] == "bad:a1b2:the-task"

    assert parse_feedback("good:a1b2:the-task") == ("good", "a1b2", "the-task")
    assert parse_feedback("bad:a1b2:the-task") == ("bad", "a1b2", "the-task")
    for forged in ("meh:a1b2:t", "good:../x:t", "good:a1b2", "good::t", ""):
        assert parse_feedback(forged) is None


def test_text_beyond_the_size_limit_is_cut_with_a_note_once() -> None:
    stream = ReplyStream(AsyncWebClient(token="xoxb-x"), ThreadRef("D1", "1.0"), "t", None)
    stream.say("a" * (STREAM_TEXT_LIMIT - 100))
    stream.say("b" * 200)
    stream.say("c" * 10)

    assert stream.pending
    queued = stream._text
    assert queued[0] == "a" * (STREAM_TEXT_LIMIT - 100)
    assert "harness show t" in queued[1] and len(queued) == 2
