"""Where a file download's redirect may take the bot's token: only to Slack's hosts over
https or the Web API's own origin, so another port of the same host (another server) never
gets it, and https never drops to http. The real Bolt app over the emulator, whose file
server redirects; agents held (what they were given is in their spec)."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp import web

from bot.downloads import token_may_follow
from harness.runtime.spec import AgentSpec
from harness.testing.held_runtime import HeldRuntime
from tests.bot.conftest import Rig, RigFactory

pytestmark = pytest.mark.anyio

WAIT = 10.0  # nothing here starts a process
LOG = b"2026-11-27 07:00:01 ERROR db: connection refused\n"


@contextlib.asynccontextmanager
async def other_server(heard: list[str]) -> AsyncIterator[str]:
    """A second loopback server on another port, serving any path; the base URL it serves,
    and the Authorization header of every request it got in ``heard``."""

    async def anything(request: web.Request) -> web.Response:
        heard.append(request.headers.get("Authorization", ""))
        return web.Response(body=LOG, content_type="text/plain")

    app = web.Application()
    app.router.add_get("/{path:.*}", anything)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    try:
        yield f"http://127.0.0.1:{runner.addresses[0][1]}"
    finally:
        await runner.cleanup()


async def send(r: Rig, files: list[dict[str, Any]]) -> tuple[str, AgentSpec]:
    sent = await r.slack.user_message("U1", "D1", "why is it down?", files=files)
    await r.held.wait_started(1, WAIT)
    return str(sent.event["ts"]), r.held.started[0]


async def test_a_download_redirected_to_another_port_of_the_api_host_gets_no_token(
    rig: RigFactory,
) -> None:
    heard: list[str] = []
    async with rig(runtime=HeldRuntime()) as r, other_server(heard) as elsewhere:
        assert r.slack.api_url.startswith("http://127.0.0.1:")  # the same host, another port
        file = r.slack.user_file("U1", "app.log", LOG, redirect=f"{elsewhere}/cdn/app.log")
        ts, spec = await send(r, [file])
        said = await r.slack.wait_for(lambda: "left out" in r.bot_text("D1", ts), WAIT)

    assert said
    assert "`app.log`: I cannot read it: its link leads away from Slack" in r.bot_text("D1", ts)
    assert spec.attachments == ()
    assert r.slack.shared_files.downloads(file["id"]) == ["Bearer xoxb-bot-test"]
    assert all("xoxb" not in header for header in heard)


async def test_a_download_redirected_within_the_api_origin_arrives(rig: RigFactory) -> None:
    async with rig(runtime=HeldRuntime()) as r:
        moved = r.slack.user_file("U1", "app.log", LOG)
        file = r.slack.user_file("U1", "app.log", b"", redirect=moved["url_private_download"])
        _, spec = await send(r, [file])

    assert [(a.name, a.content()) for a in spec.attachments] == [("app.log", LOG)]


API = "http://127.0.0.1:8080/api/"


@pytest.mark.parametrize(
    ("came_from", "url", "allowed"),
    [
        ("https://files.slack.com/a", "https://files.slack.com/b", True),
        ("https://files.slack.com/a", "https://files.slack.com:443/b", True),
        ("https://files.slack.com/a", "https://files.slack.com:8443/b", False),
        ("https://files.slack.com/a", "http://files.slack.com/b", False),
        ("https://files.slack.com/a", "http://127.0.0.1:8080/files/b", False),  # a downgrade
        ("http://127.0.0.1:8080/files/a", "http://127.0.0.1:8080/files/b", True),
        ("http://127.0.0.1:8080/files/a", "http://127.0.0.1:8081/files/b", False),
        ("http://127.0.0.1:8080/files/a", "https://127.0.0.1:8080/files/b", False),
        ("http://127.0.0.1:8080/files/a", "http://localhost:8080/files/b", False),
        ("http://127.0.0.1:8080/files/a", "http://127.0.0.1:99999/files/b", False),
        ("https://files.slack.com/a", "https://files.slack.com.evil.example/b", False),
        ("https://files.slack.com/a", "ftp://files.slack.com/b", False),
    ],
)
def test_the_token_follows_a_redirect_only_to_a_trusted_origin_never_down_to_http(
    came_from: str, url: str, allowed: bool
) -> None:
    assert token_may_follow(came_from, url, API) is allowed
