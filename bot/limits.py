"""The spend limits in Slack: a request over a limit is refused in its thread, saying which
limit, what was spent and when it resets, with a *Raise for this task* button that only an
admin may press; the press lifts the limits for that task (kept on the task) and says so.

The press is kept as a click (``bot/clicks.py``) before it is acked, so a bot stopped in
between lifts them at its next start. A new thread's request its role refuses (a model it
does not allow) is refused before its task is made, so the thread stays free.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Any

from slack_bolt.async_app import AsyncAck, AsyncApp, AsyncRespond

from bot.blocks import Block, SlackMessage, escape, failure_message
from bot.clicks import Clicks, KeptClick, click_key
from bot.outbox import Outbox
from bot.parsing import clicked_thread
from bot.progress import FAILED
from bot.unrecorded import intake_key
from harness.agents.directives import for_request
from harness.agents.spend_limits import SpendLimitError
from harness.errors import HarnessError

if TYPE_CHECKING:
    from bot.conversations import Conversations
    from bot.parsing import UserMessage

logger = logging.getLogger(__name__)

RAISE_LIMITS_ACTION = "harness_raise_limits"
ONLY_ADMINS = "Only an admin can raise the spend limits for a task."


def over_limit_message(exc: SpendLimitError, role: str, slug: str) -> SlackMessage:
    """The refusal: the limit, the spend, the reset; a button for the admins."""
    notice = failure_message(
        f"I did not start {role}: {exc.message}",
        next_step=f"wait until it resets, or an admin raises it for this task with the button "
        f"below (or for everyone in config.yaml, `{exc.limit.config_key}`); then reply here "
        "again.",
    )
    button: Block = {
        "type": "actions",
        "block_id": "harness_limits",
        "elements": [
            {
                "type": "button",
                "action_id": RAISE_LIMITS_ACTION,
                "text": {"type": "plain_text", "text": "Raise for this task"},
                "value": slug,
            }
        ],
    }
    return {"text": notice["text"], "blocks": [*notice["blocks"], button]}


def raised_message(user: str) -> SlackMessage:
    text = (
        f"⬆️ <@{escape(user)}> raised the spend limits for this task: reply here to start "
        "your request again."
    )
    return {"text": text, "blocks": [{"type": "section", "text": {"type": "mrkdwn", "text": text}}]}


async def over_limit(
    outbox: Outbox, message: UserMessage, slug: str, role: str, exc: BaseException
) -> bool:
    """When a spend limit refused the request: says so in the thread (the request is
    answered) and True; else False."""
    if not isinstance(exc, SpendLimitError):
        return False
    await outbox.owe(
        message.thread,
        [
            {"op": "post", "message": over_limit_message(exc, role, slug)},
            {"op": "react", "channel": message.channel, "ts": message.ts, "name": FAILED},
        ],
        handles=intake_key(message),
    )
    return True


async def refused_request(conversations: Conversations, message: UserMessage, role: str) -> bool:
    """A new thread's request whose directives its role refuses (a model it does not allow):
    the thread hears why and stays free, no task made, and True; else False."""
    try:
        asked = message.directives  # checked as the draft will: pure, nothing made yet
        for_request(conversations.orchestrator.role(role), model=asked.model, plan=asked.plan_first)
    except HarnessError as exc:
        conversations.index.release(message.thread)
        why = f"I could not start {role}: {exc.message}"
        notice = failure_message(why, next_step=exc.fix or "send it again without `model:`.")
        await conversations.outbox.owe(
            message.thread,
            [
                {"op": "post", "message": notice},
                {"op": "react", "channel": message.channel, "ts": message.ts, "name": FAILED},
            ],
            handles=intake_key(message),
        )
        return True
    return False


class LimitRaises:
    """The *Raise for this task* button."""

    def __init__(self, conversations: Conversations, clicks: Clicks) -> None:
        self.conversations = conversations
        self.clicks = clicks

    async def press(self, body: dict[str, Any], value: str) -> str | None:
        """Checks and keeps a press: why not, for the person (None: taken on)."""
        user = str((body.get("user") or {}).get("id", ""))
        if user not in self.conversations.settings.admins:
            return ONLY_ADMINS
        thread = clicked_thread(body)
        refused = await self.clicks.take("limits", value, user, thread)
        if refused is not None:
            return refused
        now = self.clicks.ledger.clock.now().timestamp()
        click = KeptClick(click_key("limits", value), "limits", value, user, thread, now)
        self.conversations.background.spawn(self.carry_out(click), name=f"limits {value}")
        return None

    async def carry_out(self, click: KeptClick) -> None:
        """Lifts the limits (again, harmlessly, after a restart) and says so in the thread."""
        poster = self.conversations.poster
        try:
            await self.conversations.orchestrator.tasks.raise_limits(click.subject, click.user)
        except HarnessError as exc:
            thread = click.thread
            text = f"I could not raise the limits: {exc.message}"
            await poster.ephemeral(thread.channel, click.user, text, thread.thread_ts)
            await self.clicks.settle(click.key)
            return
        await self.conversations.outbox.owe(
            click.thread, [{"op": "post", "message": raised_message(click.user)}], handles=click.key
        )


def wire_limits(app: AsyncApp, conversations: Conversations, clicks: Clicks) -> LimitRaises:
    """The button's listener, and its kept presses taken up again after a restart."""
    raises = LimitRaises(conversations, clicks)
    clicks.on("limits", raises.carry_out)

    async def on_press(
        ack: AsyncAck, body: dict[str, Any], action: dict[str, Any], respond: AsyncRespond
    ) -> None:
        started = time.perf_counter()
        refused = await raises.press(body, str(action.get("value", "")))  # kept, then acked
        await ack()
        if refused is not None:
            await respond(text=refused, response_type="ephemeral", replace_original=False)
        logger.info("raise limits of %s: %s (%.3f s)", action.get("value"), refused or "raised",
                    time.perf_counter() - started)  # fmt: skip

    app.action(RAISE_LIMITS_ACTION)(on_press)
    return raises
