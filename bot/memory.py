"""The team's memory in Slack (``harness/memory``): notes people keep per channel and per
repository, given to every agent there.

- ``@harness remember <note>`` (in a channel's thread, or a DM) keeps a note for that
  channel; ``remember repo:<name> <note>`` for a configured repository. Only a message to the
  bot counts: in a task's thread, a reply without the mention still goes to the agent.
- ``/harness memory`` lists the channel's notes and its repository's, each with *Remove* for
  whoever added it and the admins.
- An agent's result may propose notes: each is shown under the result with *Keep* and
  *Discard* for the task's requester and the admins (the click is kept before it is acked,
  ``bot/clicks.py``). The proposal is the agent's text: shown escaped and capped, never kept
  unless a person keeps it.
"""

from __future__ import annotations

import json
import logging
from typing import TYPE_CHECKING, Any

from slack_bolt.app.async_app import AsyncApp
from slack_bolt.context.ack.async_ack import AsyncAck
from slack_bolt.context.respond.async_respond import AsyncRespond

from bot.blocks import escape, mention
from bot.clicks import Clicks, KeptClick
from bot.memory_views import (
    DISCARD_ACTION,
    KEEP_ACTION,
    REMOVE_ACTION,
    USAGE,
    decided_message,
    memory_blocks,
    proposals,
    where,
)
from bot.parsing import MentionInUnboundThread, NewTask, Remember, UserMessage, remember_request
from bot.poster import CALL_ERRORS, Poster
from bot.progress import DONE
from bot.reviews import ReviewingConversations
from bot.unrecorded import intake_key
from harness.agents.orchestrator import Orchestrator
from harness.errors import HarnessError
from harness.memory.model import scope_of
from harness.memory.service import Actor, TeamMemory, derived_id
from harness.tasks.model import ThreadRef
from harness.workspaces.choice import choose_repository

if TYPE_CHECKING:
    from bot.commands import Commands

logger = logging.getLogger(__name__)

# ------------------------------------------------------------------ the bot's part


class SlackMemory:
    def __init__(self, orchestrator: Orchestrator, poster: Poster, clicks: Clicks) -> None:
        self.orchestrator = orchestrator
        self.memory: TeamMemory = orchestrator.memory
        self.poster = poster
        self.clicks = clicks
        self.admins = orchestrator.config.slack.admins

    def scopes_of(self, channel: str) -> list[str]:
        """A channel's own scope, and its repository's (as a request there would pick)."""
        found = [scope_of("channel", channel)] if channel else []
        chosen = choose_repository(self.orchestrator.config.workspaces, "", channel)
        if chosen.status == "chosen" and chosen.repository is not None:
            found.append(scope_of("repository", chosen.repository))
        return found

    async def answer(self, user: str, channel: str) -> dict[str, Any]:
        """``/harness memory``: the ack's text and blocks."""
        listed = [(scope, await self.memory.notes(scope)) for scope in self.scopes_of(channel)]
        return memory_blocks(listed, user, self.memory.may_change)

    def register(self, app: AsyncApp) -> None:
        app.action(REMOVE_ACTION)(self.on_remove)
        for action in (KEEP_ACTION, DISCARD_ACTION):
            app.action(action)(self.on_proposal)
        self.clicks.on("note", self.decide)

    async def on_remove(
        self, ack: AsyncAck, body: dict[str, Any], action: dict[str, Any], respond: AsyncRespond
    ) -> None:
        await ack()
        user = str((body.get("user") or {}).get("id") or "")
        try:
            value = json.loads(str(action.get("value") or ""))
            scope, note_id = str(value["s"]), str(value["n"])
            note = await self.memory.remove(scope, note_id, by=Actor(user))
            said = f"Removed from {where(scope)}: {escape(note.text)}"
        except HarnessError as exc:
            said = f"Not removed: {escape(exc.message)}"
        except (ValueError, KeyError, TypeError):
            said = "That button is not one of mine."
        logger.info("memory: remove by %s: %s", user, said)
        try:
            await respond(text=said, response_type="ephemeral", replace_original=False)
        except CALL_ERRORS as exc:
            logger.warning("could not answer a Remove click: %s", exc)

    async def on_proposal(
        self, ack: AsyncAck, body: dict[str, Any], action: dict[str, Any]
    ) -> None:
        """*Keep* or *Discard*: kept in the ledger before the ack, then decided."""
        user = str((body.get("user") or {}).get("id") or "")
        channel = str((body.get("channel") or {}).get("id") or "")
        message = body.get("message") or {}
        thread = ThreadRef(channel, str(message.get("thread_ts") or message.get("ts") or ""))
        try:
            value = json.loads(str(action.get("value") or ""))
            slug, agent_id, index = str(value["t"]), str(value["a"]), int(value["i"])
        except (ValueError, KeyError, TypeError):
            await ack()
            return
        keep = action.get("action_id") == KEEP_ACTION
        extra = {"keep": keep, "task": slug, "index": index, "ts": str(message.get("ts") or "")}
        refused = await self.clicks.take("note", f"{agent_id}.{index}", user, thread, extra)
        await ack()
        if refused is not None:
            await self.poster.ephemeral(channel, user, refused, thread.thread_ts)
            return
        await self.decide(KeptClick(f"click:note:{agent_id}.{index}", "note",
                                    f"{agent_id}.{index}", user, thread, 0.0, extra))  # fmt: skip

    async def decide(self, click: KeptClick) -> None:
        """Keeps or discards a proposal for the person who clicked (after a restart too),
        then settles the click."""
        try:
            said = await self._decide(click)
            if said is not None:
                await self.poster.ephemeral(
                    click.thread.channel, click.user, said, click.thread.thread_ts
                )
        finally:
            await self.clicks.settle(click.key)

    async def _decide(self, click: KeptClick) -> str | None:
        """What to tell the clicker (None: the proposal's message says it)."""
        agent_id, _, _ = click.subject.rpartition(".")
        index, keep = int(click.extra.get("index", -1)), bool(click.extra.get("keep"))
        try:
            task = await self.orchestrator.tasks.task(str(click.extra.get("task", "")))
            record = next(d for d in task.dispatches if d.agent_id == agent_id)
        except (HarnessError, StopIteration):
            return "That proposal's task is gone: nothing was kept."
        texts = proposals(record)
        if not 0 <= index < len(texts) or task.thread is None:
            return "That proposal is not in the agent's result: nothing was kept."
        asked = {task.requester, record.requested_by} - {None}
        if click.user not in asked and click.user not in self.admins:
            who = " or ".join(mention(u) for u in sorted(u for u in asked if u)) or "nobody"
            return f"Only the person who asked ({who}) and the admins keep or discard it."
        scope, text = scope_of("channel", task.thread.channel), texts[index]
        if keep:
            try:
                note = await self.memory.keep_proposal(
                    scope, text, agent_id=agent_id, index=index, by=click.user
                )
            except HarnessError as exc:
                return f"Not kept: {escape(exc.message)} ({escape(exc.fix)})"
            outcome = f"🧠 Kept by {mention(click.user)} for {where(scope)} (note `{note.id}`)."
        else:
            outcome = f"🗑️ Discarded by {mention(click.user)}."
        ts = str(click.extra.get("ts") or "")
        if not ts or not await self.poster.update(
            click.thread.channel, ts, decided_message(text, outcome)
        ):
            await self.poster.post(click.thread, outcome)
        return None


class RememberingConversations(ReviewingConversations):
    """The bot's conversations, where a message to the bot starting with ``remember`` keeps a
    note instead of starting an agent."""

    memory: SlackMemory | None = None  # set by ``wire_memory``

    async def _start(
        self,
        decision: NewTask | MentionInUnboundThread,
        bot_user_id: str,
        *,
        repository: str | None = None,
    ) -> None:
        request = remember_request(decision.message.text) if self.memory else None
        if request is not None:
            self.index.release(decision.message.thread)  # no task: the thread stays free
            await self._remember(decision.message, request)
            return
        await super()._start(decision, bot_user_id, repository=repository)

    async def _follow_up(self, message: UserMessage) -> None:
        addressed = message.mentioned or message.is_dm
        request = remember_request(message.text) if self.memory and addressed else None
        if request is not None:
            await self._remember(message, request)
            return
        await super()._follow_up(message)

    async def _remember(self, message: UserMessage, request: Remember) -> None:
        assert self.memory is not None
        await self.watcher.thread_status.show(message.thread, "")
        if not request.text:
            await self._fail(message, "There is nothing to remember in your message.", USAGE)
            return
        try:
            scope = self._scope(message, request)
            # Drawn from the message: a request replayed after a restart keeps one note.
            note_id = derived_id("message", message.channel, message.ts)
            note = await self.memory.memory.add(
                scope, request.text, by=message.user, note_id=note_id
            )
        except HarnessError as exc:
            await self._fail(message, f"I did not keep that note: {exc.message}", exc.fix)
            return
        said = (
            f"🧠 Noted for {where(scope)} (note `{note.id}`): every later agent "
            f"{'working in it' if scope.startswith('repository:') else 'here'} gets it. "
            "`/harness memory` lists and removes notes."
        )
        await self.outbox.owe(
            message.thread,
            [{"op": "post", "message": said},
             {"op": "react", "channel": message.channel, "ts": message.ts, "name": DONE}],
            handles=intake_key(message),
        )  # fmt: skip

    def _scope(self, message: UserMessage, request: Remember) -> str:
        if request.repository is None:
            return scope_of("channel", message.channel)
        known = self.orchestrator.config.workspaces.repositories
        name = next((k for k in known if k.lower() == request.repository.lower()), None)
        if name is None:
            listed = ", ".join(sorted(known)) or "(none)"
            raise HarnessError(
                f"no repository {request.repository[:60]!r} in config.yaml",
                fix=f"name one of: {listed}",
            )
        return scope_of("repository", name)


def wire_memory(app: AsyncApp, conversations: object, commands: Commands, clicks: Clicks) -> None:
    """Memory's part of the bot: ``remember`` in conversations, ``/harness memory``, the
    Remove, Keep and Discard buttons (and kept clicks taken up after a restart)."""
    if not isinstance(conversations, RememberingConversations):
        return
    memory = SlackMemory(conversations.orchestrator, conversations.poster, clicks)
    conversations.memory = memory
    commands.memory = memory
    memory.register(app)
