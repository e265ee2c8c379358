"""What a bot replica learns from the shared store before it decides on a message event
(``Conversations.on_message_event`` decides without awaiting anything): whether another
replica saw the delivery first (``Dedupe.claim``), and which task a thread another replica
started belongs to, so a follow-up there goes to that task with its context, whichever
replica gets it. With one process's store, nothing: its memory knows it all.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from bot.conversations import Conversations
from bot.dedupe import event_keys
from bot.parsing import UserMessage, parse_message_event
from harness.errors import HarnessError

logger = logging.getLogger(__name__)


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
    if task is not None and not conversations.index.is_bound(parsed.thread):
        conversations.index.bind(parsed.thread, task.slug)
