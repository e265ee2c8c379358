"""The Slack app: a slack_bolt ``AsyncApp`` wired to the orchestrator.

``create_app`` is the one factory (the client is injectable, e.g. pointed at a loopback
Slack); ``bot.server`` serves what it returns over Socket Mode or HTTP.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import Any

from slack_bolt.app.async_app import AsyncApp
from slack_bolt.context.ack.async_ack import AsyncAck
from slack_bolt.context.async_context import AsyncBoltContext
from slack_bolt.context.respond.async_respond import AsyncRespond
from slack_sdk.http_retry.builtin_async_handlers import AsyncRateLimitErrorRetryHandler
from slack_sdk.web.async_client import AsyncWebClient

from bot.background import Background
from bot.commands import Commands
from bot.conversations import Conversations
from bot.poster import Poster
from bot.progress import AgentWatcher
from bot.requesters import Requesters
from bot.settings import BotOptions, SlackEnv
from harness.metadata import MetadataCollector
from harness.orchestrator import Orchestrator

logger = logging.getLogger(__name__)


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
    options: BotOptions

    async def start(self) -> None:
        """Loads what is on disk (thread bindings, requesters) before the first event."""
        await asyncio.to_thread(self.conversations.load)

    async def close(self) -> None:
        """Waits (bounded) for the bot's own work in flight, e.g. the final posts of agents
        that a shutdown just stopped."""
        await self.background.drain(self.options.drain_timeout)


def create_app(
    orchestrator: Orchestrator,
    env: SlackEnv,
    *,
    client: AsyncWebClient | None = None,
    options: BotOptions | None = None,
) -> HarnessBot:
    options = options or BotOptions()
    client = client or make_client(env, options)
    config = orchestrator.config
    # Bolt acks events before it runs listeners (process_before_response=False): the
    # listeners only decide and hand the work to background tasks.
    app = AsyncApp(
        client=client,
        signing_secret=env.signing_secret or "",
        process_before_response=False,
    )
    background = Background()
    poster = Poster(client)
    watcher = AgentWatcher(orchestrator, poster, interval=options.status_interval)
    requesters = Requesters(config.tasks_dir)
    conversations = Conversations(
        orchestrator,
        poster,
        watcher,
        requesters,
        background,
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
        metadata=MetadataCollector(config.metadata),
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
        options=options,
    )
