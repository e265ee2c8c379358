"""The page of ``harness bot --emulator`` over the emulator's own server: what it serves, what
a waiting poll answers, and bad requests refused with the reason, nothing stored."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from bot.emulator_page import CHANNEL, DM, USER, EmulatorPage
from bot.testing.slack_emulator import SlackEmulator
from harness.cli.main import main

pytestmark = pytest.mark.anyio


@pytest.fixture
async def page() -> AsyncIterator[tuple[SlackEmulator, aiohttp.ClientSession]]:
    slack = SlackEmulator(delivery="none")  # stored, not delivered: no bot behind it here
    shown = EmulatorPage(slack, poll_seconds=0.2)
    slack.server.extra_routes.append(shown.add_routes)
    async with slack, aiohttp.ClientSession(slack.base_url) as http:
        yield slack, http


async def _post(http: aiohttp.ClientSession, route: str, body: Any) -> tuple[int, Any]:
    async with http.post(f"/ui/{route}", json=body) as answer:
        return answer.status, await answer.json()


async def test_the_page_and_its_script_are_served_from_the_package(
    page: tuple[SlackEmulator, aiohttp.ClientSession],
) -> None:
    _, http = page
    async with http.get("/") as answer:
        html = await answer.text()
    async with http.get("/ui/emulator.js") as script:
        assert script.status == 200
        assert "/ui/state?since=" in await script.text()
    assert answer.status == 200
    assert '<script src="/ui/emulator.js">' in html


async def test_a_waiting_poll_answers_with_the_message_the_person_wrote(
    page: tuple[SlackEmulator, aiohttp.ClientSession],
) -> None:
    slack, http = page
    async with http.get("/ui/state") as first:
        seen = await first.json()
    assert [c["id"] for c in seen["channels"]] == [DM, CHANNEL]

    async def poll() -> Any:
        async with http.get(f"/ui/state?since={seen['version']}") as answer:
            return await answer.json()

    waiting = asyncio.ensure_future(poll())
    status, sent = await _post(http, "message", {"channel": CHANNEL, "text": "@harness hi"})
    state = await waiting

    assert status == 200
    assert state["version"] > seen["version"]
    [shown] = state["messages"][CHANNEL]
    # "@harness" as typed is a mention of the bot, as Slack's autocomplete makes it.
    assert (shown["ts"], shown["user"], shown["text"]) == (sent["ts"], USER, "<@UBOT> hi")
    assert slack.messages(CHANNEL)[0]["text"] == "<@UBOT> hi"


@pytest.mark.parametrize(
    ("route", "body", "error"),
    [
        ("message", {"channel": DM, "text": "  "}, "text: some text"),
        ("message", {"channel": "../etc", "text": "hi"}, "channel: a channel id"),
        ("message", {"channel": DM, "text": "/harness tasks"}, "slash commands go through"),
        ("message", {"channel": DM, "text": "hi", "thread_ts": "x"}, "thread_ts: a message"),
        ("command", {"channel": DM, "text": "/deploy now"}, "one slash command: /harness"),
        (
            "action",
            {"channel": DM, "ts": "1700000000.000100", "action_id": "a", "value": "v"},
            "no message 1700000000.000100 in DUYOU",
        ),
        ("stop", {"channel": DM, "thread_ts": "1700000000.000100"}, "no agent session"),
        ("message", ["not", "an", "object"], "the body is a JSON object"),
    ],
)
async def test_a_bad_request_from_the_page_is_refused_with_the_reason_and_nothing_stored(
    page: tuple[SlackEmulator, aiohttp.ClientSession], route: str, body: Any, error: str
) -> None:
    slack, http = page

    status, answer = await _post(http, route, body)

    assert status == 400
    assert error in answer["error"]
    assert slack.messages(DM) == [] and slack.ephemeral() == []


async def test_a_post_that_is_not_json_is_refused_so_other_sites_cannot_post_as_the_person(
    page: tuple[SlackEmulator, aiohttp.ClientSession],
) -> None:
    slack, http = page
    # What a form on another site can send without a CORS preflight.
    form = {"channel": DM, "text": "plan: delete everything"}
    async with http.post("/ui/message", data=form) as answer:
        assert answer.status == 415
    assert slack.messages(DM) == []


def test_real_without_the_emulator_is_refused_saying_what_it_is_for(
    project_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["bot", "--real", "--config", str(project_dir / "config.yaml")])

    assert code == 2
    assert "--real is for --emulator" in capsys.readouterr().err


def test_a_port_in_use_is_refused_naming_it_and_what_to_pass_instead(
    project_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        config = str(project_dir / "config.yaml")

        code = main(["bot", "--emulator", "--port", str(port), "--config", config])

    err = capsys.readouterr().err
    assert code == 2
    assert f"harness: cannot listen on 127.0.0.1:{port}" in err
    assert "pass another --port (0 picks a free one)" in err
