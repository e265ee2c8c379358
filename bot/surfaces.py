"""Slack's surfaces for agent apps, wired into the Bolt app: the assistant thread (Bolt's
``AsyncAssistant``: a greeting and suggested prompts when it starts), the App Home tab with its
*Kill* buttons, the "Send to harness" and "Plan with harness" message shortcuts, the feedback
buttons under a streamed result, and a plan's *Approve and implement* and *Request changes*
(``bot/plans.py``).

Messages in assistant threads are not taken by the assistant: they reach the app's ``message``
listener like any DM, so a thread works the same in the split view and in the DM tab.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from slack_bolt.app.async_app import AsyncApp
from slack_bolt.context.ack.async_ack import AsyncAck
from slack_bolt.context.async_context import AsyncBoltContext
from slack_bolt.context.respond.async_respond import AsyncRespond
from slack_bolt.context.say.async_say import AsyncSay
from slack_bolt.context.set_suggested_prompts.async_set_suggested_prompts import (
    AsyncSetSuggestedPrompts,
)
from slack_bolt.middleware.assistant.async_assistant import AsyncAssistant

from bot import plans, unfinished
from bot.access import check_access
from bot.assistant import GREETING, suggested_prompts
from bot.attachments import files_of, with_files_text
from bot.blocks import RERUN_MODEL_ACTION
from bot.commands import Commands
from bot.conversations import Conversations
from bot.home import KILL_ACTION, HomeTab
from bot.parsing import MAX_TEXT_CHARS, Ignore, clicked_thread
from bot.plans import APPROVE_ACTION, CHANGES_ACTION, MODEL_ACTION
from bot.poster import CALL_ERRORS, Poster, classify
from bot.streaming import FEEDBACK_ACTION, parse_feedback
from harness.agents.orchestrator import Orchestrator
from harness.agents.visibility import is_direct_message
from harness.errors import HarnessError
from harness.tasks.model import ThreadRef

logger = logging.getLogger(__name__)

SHORTCUT = "send_to_harness"
# The same, asking for a plan to approve before any change (``plan first:``).
PLAN_SHORTCUT = "plan_with_harness"
PlanAct = Callable[[Conversations, ThreadRef, str, str, Mapping[str, Any]], Awaitable[str | None]]


def shortcut_request(text: str, author: str | None, permalink: str | None) -> str:
    """The request a message becomes: its text, then who wrote it and where it is."""
    source = f"<@{author}>'s message" if author else "a message"
    where = f" ({permalink})" if permalink else ""
    return f"{text.strip()}\n\n(Sent to harness from {source}{where}.)"


def shortcut_event(payload: Mapping[str, Any], request: str, bot_user_id: str) -> dict[str, Any]:
    """The shortcut as the message event the bot already handles: from the person who used
    it, addressed to the bot, in the message's thread (a top-level message starts its own)."""
    channel = str((payload.get("channel") or {}).get("id") or "")
    message = payload.get("message") or {}
    ts = str(message.get("ts") or payload.get("message_ts") or "")
    event = {
        "type": "message",
        "user": str((payload.get("user") or {}).get("id") or ""),
        "channel": channel,
        "channel_type": "im" if is_direct_message(channel) else "channel",
        "ts": ts,
        "text": f"<@{bot_user_id}> {request}"[:MAX_TEXT_CHARS],
    }
    if message.get("thread_ts"):
        event["thread_ts"] = str(message["thread_ts"])
    for key in ("files", "attachments"):  # its files (and a forwarded message's) go along
        if message.get(key):
            event[key] = message[key]
    return event


def register_surfaces(
    app: AsyncApp,
    *,
    orchestrator: Orchestrator,
    conversations: Conversations,
    commands: Commands,
    poster: Poster,
    home: HomeTab,
) -> None:
    settings = orchestrator.config.slack
    commands.home = home  # what /harness shows may have a section on the home tab too
    assistant = AsyncAssistant()

    @assistant.thread_started
    async def greet(say: AsyncSay, set_suggested_prompts: AsyncSetSuggestedPrompts) -> None:
        await say(GREETING)
        prompts = suggested_prompts(orchestrator.roles)
        if prompts:
            await set_suggested_prompts(
                prompts=[{"title": p["title"], "message": p["message"]} for p in prompts],
                title="Try one of these:",
            )

    @assistant.thread_context_changed
    async def context_changed() -> None:
        """The channel the person looks at changed; the bot does not use it (Bolt's default
        would store it in a message)."""

    app.use(assistant)

    async def on_home_opened(event: dict[str, Any]) -> None:
        if event.get("tab") in (None, "home"):
            await home.publish(str(event.get("user") or ""))

    async def on_home_kill(
        ack: AsyncAck, body: dict[str, Any], action: dict[str, Any], respond: AsyncRespond
    ) -> None:
        await ack()
        user = str((body.get("user") or {}).get("id") or "")
        agent_id = str(action.get("value") or "")
        answer, outcome = await commands.kill(agent_id, user, via="the App Home")
        logger.info("home kill by %s: %s", user, outcome)
        if outcome != "stopping":  # a refusal or a gone agent: said where the person is
            try:
                await poster.client.chat_postMessage(channel=user, text=answer)
            except CALL_ERRORS as exc:
                logger.warning("could not tell %s why: %s", user, classify(exc).error)
        await home.publish(user)

    async def on_feedback(ack: AsyncAck, body: dict[str, Any], action: dict[str, Any]) -> None:
        await ack()
        user = str((body.get("user") or {}).get("id") or "")
        picked = parse_feedback(str(action.get("value") or ""))
        if picked is None:
            return
        verdict, agent_id, slug = picked
        try:
            task = await orchestrator.tasks.task(slug)
            if task.thread != clicked_thread(body):  # a value forged for another thread
                return
            await orchestrator.tasks.record_feedback(slug, agent_id, user, verdict)
            logger.info("feedback from %s on %s: %s", user, agent_id, verdict)
        except HarnessError as exc:
            logger.info("feedback on %s not recorded: %s", agent_id, exc)

    async def on_plan_shortcut(
        ack: AsyncAck, body: dict[str, Any], context: AsyncBoltContext, respond: AsyncRespond
    ) -> None:
        await on_shortcut(ack, body, context, respond, plan=True)

    async def on_shortcut(
        ack: AsyncAck,
        body: dict[str, Any],
        context: AsyncBoltContext,
        respond: AsyncRespond,
        plan: bool = False,
    ) -> None:
        started = time.perf_counter()
        await ack()
        user = str((body.get("user") or {}).get("id") or "")
        channel = str((body.get("channel") or {}).get("id") or "")
        message = body.get("message") or {}
        refusal = check_access(settings, user, channel, is_dm=is_direct_message(channel))
        text = str(message.get("text") or "")
        if refusal is not None or not (text.strip() or files_of(message)):
            why = refusal.text if refusal is not None else "That message has no text to send."
            await respond(text=why, response_type="ephemeral", replace_original=False)
            return
        ts = str(message.get("ts") or "")
        link = await poster.permalink(ThreadRef(channel, ts))
        request = shortcut_request(with_files_text(text.strip(), files_of(message)),
                                   message.get("user"), link)  # fmt: skip
        request = f"plan first: {request}" if plan else request
        event = shortcut_event(body, request, context.bot_user_id or "")
        decision = conversations.on_message_event(
            event, event_id=None, bot_user_id=context.bot_user_id or ""
        )
        logger.info("shortcut from %s in %s: %s (%.1f ms)", user, channel,
                    type(decision).__name__, (time.perf_counter() - started) * 1000)  # fmt: skip
        if isinstance(decision, Ignore) and decision.kind != "not allowed":  # told already
            why = (
                "That message is already a task of mine: reply in its thread instead."
                if decision.kind == "already handled"
                else f"Nothing started: {decision.reason}."
            )
            await respond(text=why, response_type="ephemeral", replace_original=False)

    app.event("app_home_opened")(on_home_opened)
    app.action(KILL_ACTION)(on_home_kill)
    app.action(FEEDBACK_ACTION)(on_feedback)
    app.shortcut(SHORTCUT)(on_shortcut)
    app.shortcut(PLAN_SHORTCUT)(on_plan_shortcut)

    def plan_button(act: PlanAct) -> Callable[..., Awaitable[None]]:
        """A plan's button: the click is kept (an approval, in the ledger) before it is
        acked; a refusal reaches the clicker alone."""

        async def on_click(
            ack: AsyncAck, body: dict[str, Any], action: dict[str, Any], respond: AsyncRespond
        ) -> None:
            user = str((body.get("user") or {}).get("id", ""))
            picked = action.get("selected_option") or {}  # a menu's pick, else a button's
            agent_id = str(picked.get("value") or action.get("value", ""))
            refused = await act(conversations, clicked_thread(body), agent_id, user, body)
            await ack()
            logger.info("%s on plan %s by %s: %s", action.get("action_id"), agent_id, user,
                        refused or "taken")  # fmt: skip
            if refused is not None:
                await respond(text=refused, response_type="ephemeral", replace_original=False)

        return on_click

    async def on_model_picked(ack: AsyncAck) -> None:
        await ack()  # read from the click's state when a plan's button is pressed

    async def rerun_with(
        conversations: Conversations, thread: ThreadRef, value: str, user: str,
        body: Mapping[str, Any],
    ) -> str | None:  # fmt: skip
        """A model picked in the menu beside *Run again*: run it again with that one."""
        agent_id, _, model = value.partition(" ")
        message = body.get("message")
        notice = message if isinstance(message, dict) else None
        return await unfinished.run_again(conversations, thread, agent_id, user, notice, model)

    app.action(APPROVE_ACTION)(plan_button(plans.approve))
    app.action(CHANGES_ACTION)(plan_button(plans.request_changes))
    app.action(MODEL_ACTION)(on_model_picked)
    app.action(RERUN_MODEL_ACTION)(plan_button(rerun_with))
    clicks = commands.forges.clicks  # set by the app before the surfaces are registered
    if clicks is not None:
        clicks.on("plan", lambda click: plans.resume_approval(conversations, clicks, click))
