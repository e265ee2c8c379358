"""Work cut short, taken up again in its thread.

At start-up, each request the bot had taken on before it stopped and that no agent started
on is handled now (one whose agent had started is announced as interrupted by the watcher
instead); one that waited for its person to pick a repository waits again for the click.
*Run again*, pressed under the notice that an agent was interrupted, starts the same role
over on the same request, in the same task, once.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from bot.blocks import SlackMessage, mention, rerun_done
from bot.conversations import Conversations
from bot.parsing import Ignore, parse_message_event
from harness.errors import AgentNotFoundError, HarnessError
from harness.tasks.model import ThreadRef

logger = logging.getLogger(__name__)


def started_after(iso: str, at: float) -> bool:
    try:
        started = datetime.fromisoformat(iso.replace("Z", "+00:00"))
    except ValueError:
        return False
    return started.timestamp() >= at - 1.0  # clocks of one machine: a second of slack


async def replay_intake(conversations: Conversations) -> int:
    """At start: handles each request taken on before a stop that no agent started on
    (one that had started is announced as interrupted instead). How many it replayed."""
    ledger = conversations.ledger
    replayed = 0
    for key, data, at in await ledger.intake():
        try:
            event, bot_user_id = data["event"], str(data["botUserId"])
            parsed = parse_message_event(event, bot_user_id)
        except (KeyError, TypeError, ValueError):
            logger.warning("unreadable request %s in the ledger: dropped", key)
            await ledger.handled(key)
            continue
        if isinstance(parsed, Ignore) or await _started_since(conversations, parsed.thread, at):
            await ledger.handled(key)
            continue
        if data.get("waitingForRepository") and conversations.wait_again_for_repository(
            parsed, bot_user_id
        ):
            continue  # its question is in the thread already: the click starts it
        logger.info("handling %s again: the bot stopped before it started on it", key)
        conversations.on_message_event(event, event_id=None, bot_user_id=bot_user_id, replay=True)
        replayed += 1
    return replayed


async def _started_since(conversations: Conversations, thread: ThreadRef, at: float) -> bool:
    """Whether an agent of the thread's task started at or after ``at`` (epoch s)."""
    slug = conversations.index.slug(thread)
    if slug is None:
        return False
    try:
        task = await conversations.orchestrator.tasks.task(slug)
    except HarnessError:
        return False
    return any(started_after(d.started_at, at) for d in task.dispatches)


async def run_again(
    conversations: Conversations,
    thread: ThreadRef,
    agent_id: str,
    user: str,
    notice: Mapping[str, Any] | None,
) -> str | None:
    """*Run again* was pressed under the notice that ``agent_id`` was interrupted: the same
    role starts over on the same request, in the same task, once. Why not, when it
    cannot (None when it started)."""
    orchestrator = conversations.orchestrator
    slug = conversations.index.slug(thread)
    try:
        record = await orchestrator.record(agent_id)
        task = await orchestrator.tasks.task(slug) if slug else None
    except (AgentNotFoundError, HarnessError):
        return "I do not know that agent any more."
    if task is None or all(d.agent_id != agent_id for d in task.dispatches):
        return "This button belongs to another thread's task."
    if record.status != "interrupted":
        return f"Agent `{agent_id}` {record.status}; only an interrupted agent is run again."
    requester = task.requester
    if not orchestrator.humans.may_decide(user, requester):
        who = mention(requester) if requester else "the person who asked"
        return f"Only {who} (or an admin) can run it again."
    if conversations.closing:
        return "I am shutting down; press it again once I am back."
    if not await conversations.ledger.claim(f"rerun:{agent_id}"):
        return "It has already been run again."

    async def again() -> None:
        handle = await orchestrator.draft(
            record.role, record.prompt, task_slug=task.slug, requested_by=user
        )
        ts = notice.get("ts") if notice else None
        if notice is not None and isinstance(ts, str) and notice.get("blocks"):
            shown: SlackMessage = {
                "text": str(notice.get("text", "")),
                "blocks": list(notice["blocks"]),
            }
            await conversations.poster.update(
                thread.channel, ts, rerun_done(shown, user, handle.agent_id)
            )
        await conversations.watcher.follow(
            thread, handle.agent_id, handle.role, task_slug=task.slug
        )

    conversations.lanes.enqueue(thread, again, name=f"run {agent_id} again")
    return None
