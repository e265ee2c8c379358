"""The Slack app: a slack_bolt ``AsyncApp`` wired to the orchestrator.

``create_app`` is the one factory (the client is injectable, e.g. pointed at a loopback
Slack); ``bot.server`` serves what it returns over Socket Mode or HTTP.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import Any

import aiohttp
from slack_bolt.app.async_app import AsyncApp
from slack_bolt.context.ack.async_ack import AsyncAck
from slack_bolt.context.async_context import AsyncBoltContext
from slack_bolt.context.respond.async_respond import AsyncRespond
from slack_sdk.http_retry.builtin_async_handlers import AsyncRateLimitErrorRetryHandler
from slack_sdk.web.async_client import AsyncWebClient

from bot.access import check_access
from bot.background import Background, Intake
from bot.commands import Commands
from bot.conversations import Conversations
from bot.poster import Poster
from bot.progress import AgentWatcher
from bot.questions import ACTION_PATTERN, SlackHumanChannel, parse_button_value
from bot.requesters import Requesters
from bot.settings import BotOptions, SlackEnv
from harness.orchestrator import Orchestrator
from harness.questions import Answer

logger = logging.getLogger(__name__)


class _NoTokenNotice(logging.Filter):
    """Bolt reads SLACK_BOT_TOKEN itself and then says it is unused next to our client."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "`token` will be unused" not in record.getMessage()


bolt_logger = logging.getLogger("bot.bolt")
bolt_logger.addFilter(_NoTokenNotice())


def make_client(env: SlackEnv, options: BotOptions | None = None) -> AsyncWebClient:
    """The Web API client: base URL from SLACK_API_URL, rate limits retried after
    Retry-After (on top of slack_sdk's default connection-error retries)."""
    retries = (options or BotOptions()).rate_limit_retries
    client = AsyncWebClient(token=env.bot_token, base_url=env.api_url)
    client.retry_handlers.append(AsyncRateLimitErrorRetryHandler(max_retry_count=retries))
    return client


@dataclass
class HarnessBot:
    app: AsyncApp
    client: AsyncWebClient
    orchestrator: Orchestrator
    conversations: Conversations
    commands: Commands
    background: Background
    intake: Intake
    options: BotOptions
    # The bot made its client, so it gives it one keep-alive HTTP session and closes it.
    owns_client: bool = False

    async def start(self) -> None:
        """Loads what is on disk (thread bindings, requesters) before the first event."""
        if self.owns_client and self.client.session is None:
            # One pooled session instead of a new connection per Web API call.
            self.client.session = aiohttp.ClientSession()
        await asyncio.to_thread(self.conversations.load)

    def begin_shutdown(self) -> None:
        """From now on no message starts an agent (the orchestrator is about to stop them)."""
        self.conversations.closing = True

    async def close(self) -> None:
        """Waits (bounded) for the bot's own work in flight, e.g. the final posts of agents
        that a shutdown just stopped; then closes what the bot opened."""
        await self.background.drain(self.options.drain_timeout)
        if self.owns_client and self.client.session is not None:
            session, self.client.session = self.client.session, None
            await session.close()


def create_app(
    orchestrator: Orchestrator,
    env: SlackEnv,
    *,
    client: AsyncWebClient | None = None,
    options: BotOptions | None = None,
) -> HarnessBot:
    options = options or BotOptions()
    owns_client = client is None
    client = client or make_client(env, options)
    config = orchestrator.config
    # Bolt acks events before it runs listeners (process_before_response=False): the
    # listeners only decide and hand the work to background tasks.
    app = AsyncApp(
        logger=bolt_logger,
        client=client,
        signing_secret=env.signing_secret or "",
        process_before_response=False,
    )
    background = Background()
    intake = Intake()
    poster = Poster(client)
    watcher = AgentWatcher(orchestrator, poster, interval=options.status_interval)
    requesters = Requesters(config.tasks_dir)
    conversations = Conversations(
        orchestrator,
        poster,
        watcher,
        requesters,
        background,
        intake,
        settings=config.slack,
        options=options,
    )
    commands = Commands(
        orchestrator,
        poster,
        watcher,
        requesters,
        background,
        settings=config.slack,
        options=options,
        metadata=orchestrator.metadata,
    )

    async def on_message(
        body: dict[str, Any], event: dict[str, Any], context: AsyncBoltContext
    ) -> None:
        event_id = body.get("event_id")
        decision = conversations.on_message_event(
            event,
            event_id=event_id if isinstance(event_id, str) else None,
            bot_user_id=context.bot_user_id or "",
        )
        logger.debug("event %s: %s", event_id, decision)

    async def on_command(ack: AsyncAck, respond: AsyncRespond, command: dict[str, Any]) -> None:
        await commands.handle(ack, respond, command)

    humans = SlackHumanChannel(poster)
    orchestrator.questions.add_channel(humans)

    async def on_answer_button(
        ack: AsyncAck, body: dict[str, Any], action: dict[str, Any], respond: AsyncRespond
    ) -> None:
        await ack()
        user = str((body.get("user") or {}).get("id", ""))
        channel = str((body.get("channel") or {}).get("id", ""))
        refusal = check_access(config.slack, user, channel, is_dm=channel.startswith("D"))
        if refusal is not None:
            await respond(text=refusal.text, response_type="ephemeral", replace_original=False)
            return
        picked = parse_button_value(str(action.get("value", "")), orchestrator.questions.pending())
        if picked is None or not orchestrator.questions.answer(
            picked[0].question_id, Answer(picked[1], user)
        ):
            await respond(
                text="This question is already closed.",
                response_type="ephemeral",
                replace_original=False,
            )

    app.action(ACTION_PATTERN)(on_answer_button)
    app.event("message")(on_message)
    app.event("app_mention")(on_message)
    app.command("/harness")(on_command)
    return HarnessBot(
        app=app,
        client=client,
        orchestrator=orchestrator,
        conversations=conversations,
        commands=commands,
        background=background,
        intake=intake,
        options=options,
        owns_client=owns_client,
    )
