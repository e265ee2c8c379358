"""A bot serving the Slack emulator as `harness bot` does (its routines, triggers and
GitHub webhook on its HTTP port, or on the health port in Socket Mode), on an injected clock,
for the tests of routines."""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp

from bot.app import create_app
from bot.server import BotServer
from bot.settings import BotOptions, SlackEnv
from bot.testing.slack_emulator import SlackEmulator
from harness.project import build_orchestrator, load_project
from harness.runtime.spec import AgentRuntime
from harness.testing.clock import FakeClock
from tests.bot.conftest import APP_TOKEN, BOT_TOKEN, SECRET


@contextlib.asynccontextmanager
async def routine_bot(
    config: Path,
    slack: SlackEmulator,
    clock: FakeClock,
    runtime: AgentRuntime,
    *,
    socket: bool = False,
) -> AsyncIterator[BotServer]:
    project = load_project(config)
    orchestrator = build_orchestrator(project, runtime, clock=clock)
    app_token = APP_TOKEN if socket else None
    env = SlackEnv(bot_token=BOT_TOKEN, signing_secret=SECRET, api_url=slack.api_url,
                   app_token=app_token)  # fmt: skip
    options = BotOptions(status_interval=0.5, stream_replies=False)
    if socket:  # Socket Mode serves the triggers on the health port
        server = BotServer(create_app(orchestrator, env, options=options), "socket",
                           app_token=app_token, host="127.0.0.1", health_port=0)  # fmt: skip
        await server.start()
        slack.delivery = "socket"
        try:
            yield server
        finally:
            await server.stop()
        return
    server = BotServer(create_app(orchestrator, env, options=options), "http",
                       host="127.0.0.1", port=0)  # fmt: skip
    await server.start()
    slack.bot_url, slack.delivery = server.url, "http"
    try:
        yield server
    finally:
        await server.stop()


def openings(slack: SlackEmulator, routine: str) -> list[dict[str, Any]]:
    """The threads the routine opened in its channel."""
    return [m for m in slack.messages("C0ROUTINE") if f"Routine *{routine}* fired" in
            str(m.get("text"))]  # fmt: skip


async def post(
    server: BotServer, path: str, body: bytes, headers: dict[str, str]
) -> tuple[int, Any]:
    url = f"http://127.0.0.1:{server.health_port or server.port}{path}"
    async with (
        aiohttp.ClientSession() as session,
        session.post(url, data=body, headers=headers) as response,
    ):
        text = await response.text()
        return response.status, json.loads(text) if text.startswith("{") else text


def signed(secret: str, event: str, delivery: str, payload: object) -> tuple[bytes, dict[str, str]]:
    """A GitHub webhook delivery's body and headers, signed with ``secret``."""
    body = json.dumps(payload).encode()
    signature = "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()
    headers = {"X-GitHub-Event": event, "X-GitHub-Delivery": delivery,
               "X-Hub-Signature-256": signature}  # fmt: skip
    return body, headers
