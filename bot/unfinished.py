"""Work cut short, taken up again in its thread.

At start-up, each request the bot had taken on before it stopped and that no agent started
on is handled now (one whose agent had started is announced as interrupted by the watcher
instead, or, when that agent ran on, on a worker, followed in its thread as if the bot had
not stopped); one that waited for its person to pick a repository waits again for the click.
*Run again*, pressed under the notice that an agent was interrupted, starts the same role
over on the same request, in the same task, once; the click is kept in the ledger before it
is acked, and taken up again after a restart unless its agent had started by then (that
one's end, or interruption, is said in the thread instead).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Mapping
from typing import Any

from bot.blocks import SlackMessage, mention, rerun_done
from bot.click_agents import start_for_click
from bot.clicks import (
    Clicks,
    KeptClick,
    is_click,
    shown_message,
    started_after,
    started_since,
    take_once,
)
from bot.conversations import Conversations
from bot.parsing import Ignore, UserMessage, parse_message_event
from harness.agents.dispatching import AgentHandle
from harness.errors import AgentNotFoundError, HarnessError
from harness.tasks.model import DispatchRecord, ThreadRef

logger = logging.getLogger(__name__)


async def replay_intake(conversations: Conversations) -> int:
    """At start: handles each request taken on before a stop that no agent started on
    (one that had started is announced as interrupted instead), and each a full disk kept
    from the ledger (bot/unrecorded.py) that it never took. How many it replayed."""
    ledger = conversations.ledger
    replayed = 0
    intake = await ledger.intake()
    for key, data in await conversations.unrecorded.kept():
        if any(key == taken for taken, _data, _at in intake) or conversations.dedupe.seen(key):
            await conversations.unrecorded.forget(key)  # the ledger has it (or had)
            continue
        try:
            event, bot_user_id = data["event"], str(data["botUserId"])
        except (KeyError, TypeError):
            logger.warning("unreadable request %s kept off the ledger: dropped", key)
            await conversations.unrecorded.handled(key)
            continue
        logger.info("handling %s: the bot stopped while the disk refused to record it", key)
        conversations.on_message_event(event, event_id=None, bot_user_id=bot_user_id, replay=True)
        replayed += 1
    followed = {agent_id for agent_id, _data in await ledger.watches()}
    for key, data, at in intake:
        if is_click(key):
            continue  # a button's work: taken up by bot/clicks.py
        try:
            event, bot_user_id = data["event"], str(data["botUserId"])
            parsed = parse_message_event(event, bot_user_id)
        except (KeyError, TypeError, ValueError):
            logger.warning("unreadable request %s in the ledger: dropped", key)
            await conversations.unrecorded.handled(key)  # noted now, or once the disk can
            continue
        if isinstance(parsed, Ignore):
            await conversations.unrecorded.handled(key)
            continue
        since = await _started_since(conversations, parsed.thread, at)
        if since is not None:
            slug, record = since
            if record.status != "interrupted" and record.agent_id not in followed:
                # Started for it, and no watch took the request over (the bot stopped in
                # between): its result, or its progress on a worker, goes to the thread now.
                # An interrupted one was announced at this start, with its ❌.
                _follow(conversations, parsed, key, slug, record)
                followed.add(record.agent_id)
            else:
                await conversations.unrecorded.handled(key)
            continue
        if data.get("waitingForRepository") and conversations.wait_again_for_repository(
            parsed, bot_user_id
        ):
            chosen, by = data.get("chosenRepository"), data.get("chosenBy")
            if isinstance(chosen, str) and isinstance(by, str):  # picked before the stop
                conversations.choose_repository(parsed.thread, chosen, by)
            continue  # else its question is in the thread already: the click starts it
        logger.info("handling %s again: the bot stopped before it started on it", key)
        conversations.on_message_event(event, event_id=None, bot_user_id=bot_user_id, replay=True)
        replayed += 1
    return replayed


async def _started_since(
    conversations: Conversations, thread: ThreadRef, at: float
) -> tuple[str, DispatchRecord] | None:
    """The thread's task and the first of its agents started for a person (not drafted by an
    agent) at or after ``at`` (epoch s); None when none did."""
    slug = conversations.index.slug(thread)
    if slug is None:
        return None
    try:
        task = await conversations.orchestrator.tasks.task(slug)
    except HarnessError:
        return None
    since = [d for d in task.dispatches if d.parent_id is None and started_after(d.started_at, at)]
    return (slug, since[0]) if since else None


def _follow(
    conversations: Conversations, message: UserMessage, key: str, slug: str, record: DispatchRecord
) -> None:
    """The agent started for ``message`` (the request ``key``), followed in its thread as if
    the bot had never stopped: its watch takes the request over."""
    logger.info("following agent %s: the bot stopped before it noted its watch", record.agent_id)
    follow = conversations.watcher.follow(
        message.thread, record.agent_id, record.role, task_slug=slug, reply_to=message.ts,
        handles=key, recipient=message.user,
    )  # fmt: skip
    conversations.background.spawn(follow, name=f"follow {record.agent_id}")


async def run_again(
    conversations: Conversations,
    thread: ThreadRef,
    agent_id: str,
    user: str,
    notice: Mapping[str, Any] | None,
    model: str | None = None,
) -> str | None:
    """*Run again* was pressed under the notice that ``agent_id`` was interrupted: the same
    role starts over on the same request, in the same task, once, with its model (or the
    ``model`` picked in the menu beside it). Why not, when it cannot (None when it started)."""
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
    shown = shown_message(notice)
    extra: dict[str, Any] = {"model": model or record.model, "plan": record.plan}  # or picked
    if shown:
        extra["notice"] = shown
    click = await take_once(conversations.ledger, "rerun", agent_id, user, thread, extra,
                            already="It has already been run again.")  # fmt: skip
    if isinstance(click, str):
        return click
    _enqueue(conversations, click, record.role, record.prompt, task.slug)
    return None


async def choose_repository(
    conversations: Conversations, thread: ThreadRef, repository: str, user: str
) -> str | None:
    """A repository button: the request waiting in ``thread`` starts there, and the choice
    is noted with it before the click is acked, so that a stop before its agent starts goes
    on with that repository (rather than asking again). Why not (None: started)."""
    refused = conversations.choose_repository(thread, repository, user)
    key = await _waiting_in(conversations, thread) if refused is None else None
    if key is not None:
        try:
            await conversations.ledger.annotate_intake(key, chosenRepository=repository,
                                                       chosenBy=user)  # fmt: skip
        except HarnessError as exc:  # it starts all the same; only a restart would ask again
            logger.warning("could not note the repository picked for %s: %s", key, exc.message)
    return refused


async def _waiting_in(conversations: Conversations, thread: ThreadRef) -> str | None:
    """The ledger's key of the request in ``thread`` that waits for its repository."""
    for key, data, _at in await conversations.ledger.intake():
        if not data.get("waitingForRepository") or is_click(key):
            continue
        try:
            parsed = parse_message_event(data["event"], str(data["botUserId"]))
        except (KeyError, TypeError, ValueError):
            continue
        if not isinstance(parsed, Ignore) and parsed.thread == thread:
            return key
    return None


def _enqueue(
    conversations: Conversations, click: KeptClick, role: str, prompt: str, slug: str
) -> None:
    def draft() -> Awaitable[AgentHandle]:
        return conversations.orchestrator.draft(
            role,
            prompt,
            task_slug=slug,
            requested_by=click.user,
            model=click.extra.get("model"),
            plan=bool(click.extra.get("plan")),
        )

    def marked(notice: dict[str, Any], handle: AgentHandle) -> SlackMessage:
        shown: SlackMessage = {"text": str(notice.get("text", "")),
                               "blocks": list(notice.get("blocks") or [])}  # fmt: skip
        return rerun_done(shown, click.user, handle.agent_id)

    refused, name = "Not run again", f"run {click.subject} again"
    start_for_click(
        conversations, click, draft, slug=slug, refused=refused, marked=marked, name=name
    )


async def resume_run_again(conversations: Conversations, clicks: Clicks, click: KeptClick) -> None:
    """A *Run again* kept before a stop: run now, unless an agent of its role started on the
    task since the click (the watcher says how that one ended)."""
    orchestrator = conversations.orchestrator
    slug = conversations.index.slug(click.thread)
    try:
        record = await orchestrator.record(click.subject)
        task = await orchestrator.tasks.task(slug) if slug else None
    except (AgentNotFoundError, HarnessError) as exc:
        logger.warning("cannot run %s again after the restart: %s", click.subject, exc)
        text = f"Agent `{click.subject}` was not run again after my restart: I do not know it."
        channel, ts = click.thread.channel, click.thread.thread_ts
        await conversations.poster.ephemeral(channel, click.user, text, ts)
        await clicks.settle(click.key)
        return
    if task is None or started_since(task.dispatches, record.role, click.at):
        await clicks.settle(click.key)
        return
    _enqueue(conversations, click, record.role, record.prompt, task.slug)
