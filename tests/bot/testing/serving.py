"""A Bolt app served over HTTP for the emulator's tests."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

from aiohttp import web
from slack_bolt.async_app import AsyncApp

from bot.testing.slack_emulator import SlackEmulator


@contextlib.asynccontextmanager
async def serve_http(app: AsyncApp, slack: SlackEmulator) -> AsyncIterator[str]:
    """Serves the Bolt app with its aiohttp adapter on a free port; points Slack at it and
    has it deliver there."""
    runner = web.AppRunner(app.web_app(path="/slack/events"))
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    slack.bot_url = f"http://127.0.0.1:{runner.addresses[0][1]}/slack/events"
    slack.delivery = "http"
    try:
        yield slack.bot_url
    finally:
        await runner.cleanup()
