"""What a bot replica learns from the shared store before it decides on a message event
(``Conversations.on_message_event`` decides without awaiting anything): whether another
replica saw the delivery first (``Dedupe.claim``), and which task a thread another replica
started belongs to, so a follow-up there goes to that task with its context, whichever
replica gets it. With one process's store, nothing: its memory knows it all.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from typing import Any

from bot.conversations import Conversations
from bot.dedupe import event_keys
from bot.parsing import UserMessage, parse_message_event
from bot.unrecorded import message_key
from harness.errors import HarnessError
from harness.retry import Backoff
from harness.tasks.model import Task, ThreadRef

logger = logging.getLogger(__name__)

MADE_WITHIN = 8.0  # seconds a reply waits for the task of a thread another replica took
LOOK_AGAIN = Backoff(first=0.1, cap=1.0)


async def before_deciding(
    conversations: Conversations,
    event: Mapping[str, Any],
    event_id: str | None,
    bot_user_id: str,
) -> None:
    if not conversations.ledger.shared:
        return
    await conversations.dedupe.claim(event_keys(event, event_id, bot_user_id))
    parsed = parse_message_event(event, bot_user_id)
    if not isinstance(parsed, UserMessage) or parsed.thread.thread_ts == parsed.ts:
        return  # a new thread: nobody's yet
    if conversations.index.is_bound(parsed.thread):
        return
    try:
        task = await conversations.orchestrator.tasks.find_task(parsed.thread)
    except HarnessError as exc:  # the store out of reach: decided on what this replica knows
        logger.warning("could not look up the task of thread %s: %s", parsed.thread, exc)
        return
    if task is None:
        task = await task_once_made(conversations, parsed.thread)
    if task is not None and not conversations.index.is_bound(parsed.thread):
        conversations.index.bind(parsed.thread, task.slug)


async def task_once_made(conversations: Conversations, thread: ThreadRef) -> Task | None:
    """The task of a thread whose first message another replica took, once that replica has
    made it (a busy replica makes it seconds after it took the message), so that a reply
    goes to that task with its context rather than starting another: looked for within
    ``MADE_WITHIN`` seconds. None when no replica took the first message, or none made a
    task of it by then (it was answered without one)."""
    clock = conversations.orchestrator.clock
    deadline = clock.monotonic() + MADE_WITHIN
    try:
        if not await conversations.ledger.claimed(message_key(thread.channel, thread.thread_ts)):
            return None
        for wait in LOOK_AGAIN.delays():
            if clock.monotonic() + wait > deadline:
                return None
            await asyncio.sleep(wait)
            if (task := await conversations.orchestrator.tasks.find_task(thread)) is not None:
                return task
    except HarnessError as exc:  # the store out of reach: decided on what this replica knows
        logger.warning("could not look up the task of thread %s: %s", thread, exc)
    return None
