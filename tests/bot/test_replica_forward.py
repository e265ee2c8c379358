"""Which thread a Slack request is about, as a replica decides whether another holds it."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from urllib.parse import urlencode

import pytest

from bot.replica_forward import (
    ThreadForwarder,
    killed_agent,
    letter_of,
    payload_of,
    read_letter,
    thread_of,
)
from bot.socket_intake import as_request
from harness.config.store_schema import StoreSettings
from harness.tasks.model import ThreadRef
from harness.tasks.replica_mail import ReplicaMail
from tests.harness.tasks.nats_fixtures import module_server, settings_for

server = module_server()


def test_a_message_in_a_thread_is_about_that_thread() -> None:
    event = {"event": {"type": "message", "channel": "D1", "ts": "2.0", "thread_ts": "1.0"}}
    assert thread_of("event_callback", event) == ThreadRef("D1", "1.0")


def test_a_message_that_starts_a_thread_and_a_home_tab_event_are_about_none() -> None:
    assert thread_of("event_callback", {"event": {"channel": "D1", "ts": "1.0"}}) is None
    assert thread_of("event_callback", {"event": {"type": "app_home_opened"}}) is None


def test_a_stop_pressed_on_a_session_is_about_its_thread() -> None:
    stop = {"event": {"type": "agent_session_stopped", "channel": "D1", "thread_ts": "1.0"}}
    assert thread_of("event_callback", stop) == ThreadRef("D1", "1.0")


def test_a_click_under_a_message_in_a_thread_is_about_that_thread() -> None:
    click = {
        "type": "block_actions",
        "channel": {"id": "C1"},
        "container": {"type": "message", "channel_id": "C1", "thread_ts": "1.0"},
        "message": {"ts": "3.0", "thread_ts": "1.0"},
    }
    assert thread_of("block_actions", click) == ThreadRef("C1", "1.0")
    home = {"type": "block_actions", "container": {"type": "view"}}
    assert thread_of("block_actions", home) is None


def test_commands_and_malformed_payloads_are_about_no_thread() -> None:
    assert thread_of("command", {"channel_id": "C1"}) is None
    assert thread_of("event_callback", {"event": {"channel": 5, "thread_ts": "1.0"}}) is None


def test_a_kill_command_is_about_its_agent_and_other_commands_about_none() -> None:
    kill = payload_of("command", urlencode({"command": "/harness", "text": " kill a1b2c3 "}))
    assert killed_agent("command", kill) == "a1b2c3"
    for text in ("list", "kill", "kill <@U2> & co", "tasks"):
        other = payload_of("command", urlencode({"command": "/harness", "text": text}))
        assert killed_agent("command", other) is None
    assert killed_agent("event_callback", {"text": "kill a1b2c3"}) is None


def test_an_interaction_s_payload_is_read_from_its_form_field() -> None:
    payload = {"type": "block_actions", "message": {"thread_ts": "1.0"}}
    body = urlencode({"payload": json.dumps(payload)})
    assert payload_of("block_actions", body) == payload
    assert payload_of("event_callback", json.dumps({"event": {}})) == {"event": {}}


def test_a_letter_carries_the_request_as_it_came_signed() -> None:
    headers = {"X-Slack-Signature": "v0=abc", "X-Slack-Request-Timestamp": "1700000000"}
    letter = read_letter(letter_of("block_actions", "payload=%7B%7D", "a=1", headers))
    assert letter == {
        "kind": "block_actions",
        "body": "payload=%7B%7D",
        "query": "a=1",
        "headers": headers,
    }


# ---------------------------------------------------------------- a holder that does not answer

HOLDER = "0123456789abcdef"
STOP = {"event": {"type": "agent_session_stopped", "channel": "D1", "thread_ts": "1.0",
                  "user": "U1"}}  # fmt: skip
REPLY = {"event": {"type": "message", "channel": "D1", "ts": "2.0", "thread_ts": "1.0"}}
CLICK = {"type": "block_actions", "channel": {"id": "D1"}, "message": {"ts": "3.0",
         "thread_ts": "1.0"}}  # fmt: skip


class HeldByAnother:
    """The store's answer: another live replica holds every thread's agent."""

    async def this_run(self) -> str:
        return "fedcba9876543210"

    async def held_elsewhere(self, thread: ThreadRef) -> str | None:
        return HOLDER

    async def agent_held_elsewhere(self, agent_id: str) -> str | None:
        return HOLDER


@pytest.fixture
def settings(nats_url: str) -> StoreSettings:
    return settings_for(nats_url)


@pytest.fixture
async def forwarder(settings: StoreSettings) -> AsyncIterator[tuple[ThreadForwarder, list[str]]]:
    told: list[str] = []

    async def tell(thread: ThreadRef, text: str) -> None:
        assert thread == ThreadRef("D1", "1.0")
        told.append(text)

    forwarder = ThreadForwarder(HeldByAnother(), ReplicaMail(settings), tell)
    yield forwarder, told
    await forwarder.close()


@pytest.mark.anyio
@pytest.mark.nats
@pytest.mark.parametrize(
    ("kind", "body", "said"),
    [
        pytest.param("event_callback", json.dumps(STOP), ("Stop was not passed on",
                     "again in a few seconds"), id="a-stop-is-said-not-passed-on"),
        pytest.param("block_actions", urlencode({"payload": json.dumps(CLICK)}),
                     ("click was not passed on",), id="a-click-is-said-not-passed-on"),
    ],
)  # fmt: skip
async def test_a_press_the_holder_does_not_take_is_said_in_the_thread_not_handled_here(
    forwarder: tuple[ThreadForwarder, list[str]], kind: str, body: str, said: tuple[str, ...]
) -> None:
    forward, told = forwarder
    assert await forward.forward(kind, body, "", {}) is True
    await forward.close()  # what the thread is told is said apart: its end is awaited
    [notice] = told
    assert all(words in notice for words in said), notice


@pytest.mark.anyio
@pytest.mark.nats
@pytest.mark.parametrize(
    ("kind", "body"),
    [
        pytest.param("event_callback", json.dumps(REPLY),
                     id="a-message-is-handled-here-so-nothing-is-lost"),
        pytest.param("command", urlencode({"command": "/harness", "text": "kill a1b2c3",
                     "channel_id": "C1"}), id="a-kill-is-answered-here"),
    ],
)  # fmt: skip
async def test_a_request_the_holder_does_not_take_is_handled_here_and_nothing_is_said(
    forwarder: tuple[ThreadForwarder, list[str]], kind: str, body: str
) -> None:
    forward, told = forwarder
    assert await forward.forward(kind, body, "", {}) is False
    await forward.close()
    assert told == []


@pytest.mark.anyio
@pytest.mark.nats
async def test_a_click_the_holder_takes_reaches_it_verbatim_and_nothing_is_said(
    settings: StoreSettings, forwarder: tuple[ThreadForwarder, list[str]]
) -> None:
    forward, told = forwarder
    holder = ReplicaMail(settings)
    got: asyncio.Queue[bytes] = asyncio.Queue()

    async def take(data: bytes) -> None:
        got.put_nowait(data)

    try:
        await holder.serve(HOLDER, take)
        body = urlencode({"payload": json.dumps(CLICK)})
        assert await forward.forward("block_actions", body, "q=1", {"H": "v"}) is True
        letter = read_letter(await asyncio.wait_for(got.get(), 10))
    finally:
        await holder.close()
    await forward.close()
    assert letter == {"kind": "block_actions", "body": body, "query": "q=1", "headers": {"H": "v"}}
    assert told == []


def test_a_socket_mode_slash_command_is_handed_on_as_its_http_form() -> None:
    fields = {"command": "/harness", "text": "kill a1b2c3", "response_url": "http://x/r/1"}
    request = as_request("slash_commands", fields)
    assert request is not None and request[0] == "command"
    assert payload_of(*request) == fields
    assert killed_agent("command", payload_of(*request)) == "a1b2c3"
