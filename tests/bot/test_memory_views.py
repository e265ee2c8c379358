"""What memory's Slack parts read and show (pure): ``remember`` and ``/harness memory``
parsed, an agent's proposals shown escaped, capped and with their buttons."""

from __future__ import annotations

import json
from typing import Any

from bot.memory_views import (
    DISCARD_ACTION,
    KEEP_ACTION,
    MAX_PROPOSALS,
    memory_blocks,
    proposal_messages,
    proposals,
)
from bot.parsing import Command, Remember, parse_command, remember_request
from harness.memory.model import MAX_NOTE_CHARS, Note
from harness.tasks.model import AgentResult, DispatchRecord


def test_remember_is_a_note_for_the_channel_or_a_named_repository() -> None:
    assert remember_request("remember use pnpm") == Remember("use pnpm")
    assert remember_request("Remember: tests run with make check") == Remember(
        "tests run with make check"
    )
    assert remember_request("remember repo:web  the API is in api/") == Remember(
        "the API is in api/", "web"
    )
    assert remember_request("remember") == Remember("")
    assert remember_request("please remember this") is None
    assert remember_request("remembering is hard") is None


def test_harness_memory_is_a_command() -> None:
    assert parse_command("memory") == Command("memory")


def record(*notes: str) -> DispatchRecord:
    return DispatchRecord(
        agent_id="a1",
        role="developer",
        started_at="2026-01-01T10:00:00Z",
        status="completed",
        result=AgentResult("done", proposed_notes=notes),
    )


def test_proposals_are_shown_escaped_capped_and_few_with_keep_and_discard() -> None:
    hostile = "<!channel> *ping* <https://evil.example|click>\n\nnext " + "y" * 900
    messages = proposal_messages(record(hostile, "two", "three", "four"), "t-1")

    assert len(messages) == MAX_PROPOSALS
    blocks: Any = messages[0]["blocks"]
    shown = blocks[0]["text"]["text"]
    assert "<!channel>" not in shown and "&lt;!channel&gt;" in shown and "<https" not in shown
    [kept] = proposals(record(hostile))[:1]
    assert len(kept) == MAX_NOTE_CHARS and "\n" not in kept
    buttons = blocks[1]["elements"]
    assert [b["action_id"] for b in buttons] == [KEEP_ACTION, DISCARD_ACTION]
    assert json.loads(buttons[0]["value"]) == {"t": "t-1", "a": "a1", "i": 0}


def test_the_list_offers_remove_only_on_the_notes_the_person_may_change() -> None:
    notes = [
        Note("n1", "a <b>", "channel:C1", "U1", "at"),
        Note("n2", "c", "channel:C1", "U2", "at"),
    ]

    listed = memory_blocks([("channel:C1", notes)], "U1", lambda note, user: note.added_by == user)

    with_buttons = [b for b in listed["blocks"] if "accessory" in b]
    assert [json.loads(b["accessory"]["value"]) for b in with_buttons] == [
        {"s": "channel:C1", "n": "n1"}
    ]
    assert "a &lt;b&gt;" in json.dumps(listed)
