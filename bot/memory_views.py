"""What the team's memory shows in Slack (pure): ``/harness memory``'s list with *Remove*,
and an agent's proposed notes under its result with *Keep* and *Discard* (``bot/memory.py``
acts on them). A proposal is the agent's text: shown escaped, one paragraph, capped at a
note's length, at most ``MAX_PROPOSALS`` of a result."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

from bot.blocks import (
    ActionsBlock,
    ButtonElement,
    SectionBlock,
    SlackMessage,
    escape,
    excerpt,
    mention,
)
from harness.memory.model import MAX_NOTE_CHARS, Note
from harness.tasks.model import DispatchRecord

REMOVE_ACTION = "memory_remove"
KEEP_ACTION = "memory_keep"
DISCARD_ACTION = "memory_discard"
# An agent proposes at most this many notes per result; more are not shown.
MAX_PROPOSALS = 3
USAGE = (
    "Say `remember <note>` to keep a note for this channel, or `remember repo:<name> <note>` "
    "for a repository: every later agent there gets it. `/harness memory` lists them."
)


def _section(text: str) -> SectionBlock:
    return {"type": "section", "text": {"type": "mrkdwn", "text": text}}


def _button(text: str, action: str, value: str) -> ButtonElement:
    return {"type": "button", "text": {"type": "plain_text", "text": text},
            "action_id": action, "value": value}  # fmt: skip


def where(scope: str) -> str:
    """``this channel`` or ``repository `web```, for the thread."""
    kind, _, name = scope.partition(":")
    return f"repository `{escape(name)}`" if kind == "repository" else "this channel"


def note_line(note: Note) -> str:
    who = mention(note.added_by)
    by = f"kept by {who} from an agent" if note.source == "agent" else f"by {who}"
    return f"`{note.id}` {escape(note.text)} _({by})_"


def memory_blocks(
    listed: Sequence[tuple[str, Sequence[Note]]],
    user: str,
    may_change: Callable[[Note, str], bool],
) -> dict[str, Any]:
    """``/harness memory``: each scope's notes, *Remove* on those ``user`` may change."""
    header = _section("*Memory*: notes every agent here gets in its context")
    blocks: list[dict[str, Any]] = [dict(header)]
    for scope, notes in listed:
        blocks.append(dict(_section(f"*{where(scope).capitalize()}*: {len(notes)} note(s)")))
        for note in notes:
            block: dict[str, Any] = dict(_section(note_line(note)))
            if may_change(note, user):
                remove = _button("Remove", REMOVE_ACTION, json.dumps({"s": scope, "n": note.id}))
                block["accessory"] = {**remove, "style": "danger"}
            blocks.append(block)
    blocks.append({"type": "context", "elements": [{"type": "mrkdwn", "text": USAGE}]})
    return {"text": "Memory", "blocks": blocks}


def proposals(record: DispatchRecord) -> list[str]:
    """The notes the agent's result proposes, as shown and kept: one paragraph each, capped."""
    if record.result is None:
        return []
    found = [" ".join(text.split()) for text in record.result.proposed_notes[:MAX_PROPOSALS]]
    return [excerpt(text, MAX_NOTE_CHARS) for text in found if text]


def proposal_messages(record: DispatchRecord, task_slug: str) -> list[SlackMessage]:
    """One message per proposed note, with *Keep* and *Discard*."""
    messages: list[SlackMessage] = []
    for index, text in enumerate(proposals(record)):
        value = json.dumps({"t": task_slug, "a": record.agent_id, "i": index})
        said = (
            f"💡 *{escape(record.role)}* proposes a note for this channel's memory (every "
            f"later agent here would get it):\n>{escape(text)}"
        )
        keep = _button("Keep", KEEP_ACTION, value)
        keep["style"] = "primary"
        discard = _button("Discard", DISCARD_ACTION, value)
        actions: ActionsBlock = {
            "type": "actions",
            "block_id": f"memory-{index}",
            "elements": [keep, discard],
        }
        fallback = f"A proposed note: {escape(excerpt(text))}"
        messages.append({"text": fallback, "blocks": [_section(said), actions]})
    return messages


def decided_message(text: str, outcome: str) -> SlackMessage:
    said = f">{escape(text)}\n{outcome}"
    return {"text": outcome, "blocks": [_section(said)]}
