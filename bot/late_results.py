"""A result that comes in after its thread was told (or was about to be told) that its agent
was interrupted: what is said before it, and where it goes.

The interruption notice offers to run the agent again (*Run again*), which must never stay
under an agent that finished. A notice the thread already shows is replaced by the result;
one still waiting in the outbox (Slack was failing, say) is withdrawn, and the result goes
where the notice would have gone: in place of the agent's status message, with the reaction
on the person's message. Pure: the outbox entry in, the place out.

An agent a stop interrupted before its watch was noted is told in its thread all the same;
its ❌ goes on the request the ledger still keeps for it (``asked_before``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from bot.blocks import RERUN_ACTION, SlackMessage, escape
from bot.clicks import started_after
from bot.outbox_steps import Entry
from bot.parsing import Ignore, parse_message_event
from harness.tasks.model import DispatchRecord, ThreadRef


def interruption_key(agent_id: str) -> str:
    """The key of the outbox entry that tells a thread ``agent_id`` was interrupted."""
    return f"{agent_id}.interrupted"


def late_notice(record: DispatchRecord) -> SlackMessage:
    """Said before the result of an agent its thread was told was interrupted."""
    verb = {"completed": "finished", "killed": "was stopped"}.get(record.status, record.status)
    text = (
        f"↩️ *{escape(record.role)}* (agent `{escape(record.agent_id)}`) {verb} after all: "
        "its worker could not be heard for a while, so it was reported interrupted; its "
        "result came in since, below (it replaces that notice)."
    )
    return {"text": text, "blocks": [{"type": "section", "text": {"type": "mrkdwn", "text": text}}]}


def rerun_buttons(message: Mapping[str, Any]) -> list[str]:
    """The agent ids a message's *Run again* buttons would run again."""
    return [
        str(element.get("value"))
        for block in message.get("blocks") or []
        if isinstance(block, dict)
        for element in block.get("elements") or []
        if isinstance(element, dict) and element.get("action_id") == RERUN_ACTION
    ]


@dataclass(frozen=True)
class Place:
    """Where a withdrawn notice would have gone: the status message it would have replaced
    (a stream it would have closed), and the person's message it would have reacted to."""

    status_ts: str | None
    streaming: bool
    reply_to: str | None


def place_of(entry: Entry) -> Place:
    """Where the withdrawn outbox ``entry`` (an interruption notice) would have gone."""
    status_ts: str | None = None
    streaming = False
    reply_to: str | None = None
    for step in entry["steps"]:
        if step["op"] in ("update", "stop_stream", "delete") and status_ts is None:
            status_ts = step["ts"]
            streaming = step["op"] == "stop_stream"
        elif step["op"] == "react" and not step.get("remove") and reply_to is None:
            reply_to = step["ts"]
    return Place(status_ts, streaming, reply_to)


def asked_before(
    intake: Iterable[tuple[str, Mapping[str, Any], float]], thread: ThreadRef, started_at: str
) -> str | None:
    """The ts of the person's message an agent of ``thread`` that started at ``started_at``
    was started for, when the bot stopped before the agent's watch took the request over:
    the first request of the thread in ``intake`` (the ledger's requests taken on, oldest
    first) taken on before the agent started, as a thread's requests are taken up in turn;
    None when there is none."""
    for _key, data, at in intake:
        try:
            parsed = parse_message_event(data["event"], str(data["botUserId"]))
        except (KeyError, TypeError, ValueError):
            continue
        if isinstance(parsed, Ignore) or parsed.thread != thread:
            continue
        if started_after(started_at, at):
            return parsed.ts
    return None
