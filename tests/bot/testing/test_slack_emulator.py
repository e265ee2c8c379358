"""The loopback Slack emulator, driven by the real slack_sdk and slack_bolt clients."""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import aiohttp
import pytest
from slack_bolt.adapter.socket_mode.async_handler import AsyncSocketModeHandler
from slack_bolt.app.async_app import AsyncApp
from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError
from slack_sdk.http_retry.builtin_async_handlers import AsyncRateLimitErrorRetryHandler
from slack_sdk.web.async_client import AsyncWebClient

from bot.testing.slack_emulator import ApiCall, SlackEmulator, transcript_line
from bot.testing.slack_model import sign
from tests.bot.testing.serving import serve_http

BOT_TOKEN = "xoxb-test-token"
APP_TOKEN = "xapp-test-token"
SECRET = "test-signing-secret"
JSON = dict[str, Any]
Listener = Callable[..., Awaitable[None]]


@pytest.fixture
async def slack() -> AsyncIterator[SlackEmulator]:
    emulator = SlackEmulator(signing_secret=SECRET, bot_token=BOT_TOKEN, app_token=APP_TOKEN)
    async with emulator:
        yield emulator


def client_for(slack: SlackEmulator, token: str = BOT_TOKEN) -> AsyncWebClient:
    return AsyncWebClient(token=token, base_url=slack.api_url)


def bolt_app(slack: SlackEmulator) -> AsyncApp:
    # Token goes in the client only: passing `token=` as well makes Bolt log a warning.
    return AsyncApp(client=client_for(slack), signing_secret=SECRET)


def reply_in_thread(app: AsyncApp) -> None:
    async def on_message(event: JSON, say: Any) -> None:
        await say(text=f"echo: {event['text']}", thread_ts=event.get("thread_ts") or event["ts"])

    app.event("message")(on_message)


@contextlib.asynccontextmanager
async def serve_socket(app: AsyncApp) -> AsyncIterator[AsyncSocketModeHandler]:
    # The handler calls apps.connections.open through `app.client`, so through its base_url.
    handler = AsyncSocketModeHandler(app, APP_TOKEN, ping_interval=30)
    await handler.connect_async()  # type: ignore[no-untyped-call]
    try:
        yield handler
    finally:
        await handler.close_async()  # type: ignore[no-untyped-call]


# --------------------------------------------------------------------------- Web API


@pytest.mark.anyio
async def test_web_client_posts_updates_replies_and_reacts(slack: SlackEmulator) -> None:
    client = client_for(slack)
    auth = await client.auth_test()
    assert (auth["user_id"], auth["bot_id"], auth["team_id"]) == ("UBOT", "BBOT", "T1")

    blocks = [{"type": "section", "text": {"type": "mrkdwn", "text": "*working*"}}]
    parent = await client.chat_postMessage(channel="C1", text="working", blocks=blocks)
    assert parent["ok"] and parent["channel"] == "C1"
    assert parent["message"]["bot_id"] == "BBOT" and parent["message"]["user"] == "UBOT"
    ts = parent["ts"]
    reply = await client.chat_postMessage(channel="C1", text="step 1", thread_ts=ts)
    assert float(reply["ts"]) > float(ts)
    await client.chat_update(channel="C1", ts=ts, text="done")
    await client.reactions_add(channel="C1", timestamp=ts, name="white_check_mark")
    await client.reactions_add(channel="C1", timestamp=ts, name="eyes")
    await client.reactions_remove(channel="C1", timestamp=ts, name="eyes")

    thread = slack.thread("C1", ts)
    assert [m["text"] for m in thread] == ["done", "step 1"]
    assert thread[0]["reply_count"] == 1 and "edited" in thread[0]
    assert slack.reactions("C1", ts) == {"white_check_mark"}
    replies = await client.conversations_replies(channel="C1", ts=ts)
    assert [m["ts"] for m in replies["messages"]] == [ts, reply["ts"]]
    assert not replies["has_more"]
    history = await client.conversations_history(channel="C1")
    assert [m["ts"] for m in history["messages"]] == [ts]

    posted = slack.calls("chat.postMessage")[0]
    assert posted.params["blocks"] == blocks  # JSON-decoded
    assert "token" not in posted.params
    await client.chat_delete(channel="C1", ts=reply["ts"])
    assert [m["text"] for m in slack.thread("C1", ts)] == ["done"]
    ephemeral = await client.chat_postEphemeral(channel="C1", user="U1", text="psst")
    assert ephemeral["message_ts"]
    assert [e["text"] for e in slack.ephemeral("U1")] == ["psst"] and not slack.ephemeral("U2")


@pytest.mark.anyio
async def test_info_methods_and_errors(slack: SlackEmulator) -> None:
    client = client_for(slack)
    slack.delivery = "none"  # no bot here: store the message, deliver nothing
    assert (await slack.user_message("U1", "D1", "hi")).status is None
    info = await client.conversations_info(channel="D1")
    assert info["channel"]["is_im"]
    user = await client.users_info(user="U1")
    assert user["user"]["id"] == "U1" and not user["user"]["is_bot"]
    for call, error in [
        (client.api_call("nope.nope"), "unknown_method"),
        (client_for(slack, "xoxb-wrong").auth_test(), "invalid_auth"),
        (client_for(slack, APP_TOKEN).auth_test(), "not_allowed_token_type"),
        (client.apps_connections_open(app_token="xapp-wrong"), "invalid_auth"),
        (client.users_info(user="UNOBODY"), "user_not_found"),
        (client.reactions_add(channel="D1", timestamp="1.000000", name="x"), "message_not_found"),
        (client.conversations_replies(channel="D1", ts="1.000000"), "thread_not_found"),
    ]:
        with pytest.raises(SlackApiError) as caught:
            await call
        assert caught.value.response.status_code == 200
        assert caught.value.response["error"] == error
    assert slack.calls("nope.nope")[0].response == {"ok": False, "error": "unknown_method"}

    slack.faults.fail_next("chat.postMessage", status=200, error="channel_not_found")
    with pytest.raises(SlackApiError, match="channel_not_found"):
        await client.chat_postMessage(channel="C9", text="x")
    await client.chat_postMessage(channel="C9", text="x")


@pytest.mark.anyio
@pytest.mark.waits
async def test_rate_limit_is_retried_and_the_message_arrives_once(slack: SlackEmulator) -> None:
    client = client_for(slack)
    client.retry_handlers.append(AsyncRateLimitErrorRetryHandler(max_retry_count=2))
    slack.faults.fail_next("chat.postMessage", times=1, status=429, retry_after=0)
    posted = await client.chat_postMessage(channel="C1", text="hello")
    assert posted["ok"]
    assert [c.status for c in slack.calls("chat.postMessage")] == [429, 200]
    assert slack.calls("chat.postMessage")[0].response["error"] == "ratelimited"
    assert [m["text"] for m in slack.messages("C1")] == ["hello"]

    slack.faults.fail_next("chat.postMessage", status=429, retry_after=0)
    with pytest.raises(SlackApiError) as caught:
        await client_for(slack).chat_postMessage(channel="C1", text="no retry handler")
    assert caught.value.response.status_code == 429
    assert caught.value.response.headers["Retry-After"] == "0"


@pytest.mark.anyio
@pytest.mark.waits
async def test_faults_answer_raw_pages_reset_the_connection_or_hang(slack: SlackEmulator) -> None:
    page = "<html><body><h1>502 Bad Gateway</h1></body></html>"
    slack.faults.fail_next("chat.postMessage", status=502, body=page)
    slack.faults.fail_next(
        "chat.postMessage", status=503, body="upstream reset", content_type="text/plain"
    )
    slack.faults.drop_next("chat.postMessage", how="reset")
    slack.faults.drop_next("chat.postMessage", how="hang")
    timeout = aiohttp.ClientTimeout(total=0.5)
    async with aiohttp.ClientSession(timeout=timeout) as session:
        url = f"{slack.api_url}chat.postMessage"
        auth = {"Authorization": f"Bearer {BOT_TOKEN}"}

        def post() -> Any:
            return session.post(url, json={"channel": "C1", "text": "hi"}, headers=auth)

        async with post() as html:
            assert (html.status, html.content_type, await html.text()) == (502, "text/html", page)
        async with post() as text:
            assert (text.status, text.content_type) == (503, "text/plain")
            assert await text.text() == "upstream reset"
        with pytest.raises(aiohttp.ClientConnectionError):
            await post()
        with pytest.raises(TimeoutError):
            await post()
        async with post() as healthy:
            assert (await healthy.json())["ok"]
    assert [c.status for c in slack.calls("chat.postMessage")] == [502, 503, 0, 0, 200]
    assert [m["text"] for m in slack.messages("C1")] == ["hi"]


@pytest.mark.anyio
async def test_user_edits_and_deletes_are_stored_and_delivered(slack: SlackEmulator) -> None:
    slack.delivery = "none"
    parent = (await slack.user_message("U1", "C1", "first", channel_type="channel")).event
    reply = (await slack.user_message("U2", "C1", "second", thread_ts=parent["ts"])).event
    assert reply["parent_user_id"] == "U1" and reply["channel_type"] == "channel"

    edited = await slack.user_edit("U2", "C1", reply["ts"], "second, edited")
    assert edited.event["subtype"] == "message_changed"
    assert edited.event["previous_message"]["text"] == "second"
    assert edited.event["message"]["text"] == "second, edited"
    assert slack.thread("C1", parent["ts"])[1]["text"] == "second, edited"

    deleted = await slack.user_delete("C1", parent["ts"])
    assert deleted.event["subtype"] == "message_deleted"
    assert deleted.event["deleted_ts"] == parent["ts"]
    # A parent with replies leaves a tombstone, as in Slack.
    thread = slack.thread("C1", parent["ts"])
    assert [m.get("subtype") for m in thread] == ["tombstone", None]
    await slack.user_delete("C1", reply["ts"])
    assert slack.thread("C1", parent["ts"])[0]["reply_count"] == 0


# --------------------------------------------------------------------------- HTTP mode


@pytest.mark.anyio
async def test_http_bolt_app_gets_signed_event_and_replies_in_thread(slack: SlackEmulator) -> None:
    app = bolt_app(slack)
    reply_in_thread(app)
    async with serve_http(app, slack):
        delivered = await slack.user_message("U1", "D1", "fix the bug")
        assert delivered.status == 200 and delivered.event_id
        ts = delivered.event["ts"]
        thread = await slack.wait_for(lambda: (t := slack.thread("D1", ts))[1:] and t)
        assert [m["text"] for m in thread] == ["fix the bug", "echo: fix the bug"]
        assert thread[1]["bot_id"] == "BBOT"
        assert slack.calls("auth.test")  # Bolt authorizes before it runs listeners

        follow_up = await slack.user_message("U1", "D1", "and the tests", thread_ts=ts)
        assert follow_up.event["thread_ts"] == ts
        await slack.wait_for(lambda: len(slack.thread("D1", ts)) == 4)


@pytest.mark.anyio
async def test_http_bad_signature_or_stale_timestamp_gets_401(slack: SlackEmulator) -> None:
    app = bolt_app(slack)
    reply_in_thread(app)
    body = json.dumps({"type": "url_verification", "challenge": "c1"}).encode()
    async with serve_http(app, slack):
        status, text = await slack.post_signed(body, content_type="application/json")
        assert (status, json.loads(text)) == (200, {"challenge": "c1"})
        bad = await slack.post_signed(
            body, content_type="application/json", signature_override="v0=" + "0" * 64
        )
        assert bad[0] == 401
        old = str(int(time.time()) - 600)
        stale = await slack.post_signed(
            body,
            content_type="application/json",
            timestamp_override=old,
            signature_override=sign(SECRET, old, body),
        )
        assert stale[0] == 401


@pytest.mark.anyio
async def test_http_retry_keeps_event_id_and_carries_retry_headers(slack: SlackEmulator) -> None:
    app = bolt_app(slack)
    seen: list[tuple[str, str | None, str | None]] = []

    async def on_message(body: JSON, request: Any) -> None:
        headers = request.headers
        retry = (headers.get("x-slack-retry-num") or [None])[0]
        reason = (headers.get("x-slack-retry-reason") or [None])[0]
        seen.append((body["event_id"], retry, reason))

    app.event("message")(on_message)
    async with serve_http(app, slack):
        first = await slack.user_message("U1", "D1", "hello")
        again = await slack.deliver_event(first.event, retry_of=first)
        assert again.event_id == first.event_id and again.retry_num == 1
        await slack.wait_for(lambda: len(seen) == 2)
    assert seen == [(first.event_id, None, None), (first.event_id, "1", "http_timeout")]


@pytest.mark.anyio
async def test_http_mention_arrives_as_message_and_app_mention(slack: SlackEmulator) -> None:
    app = bolt_app(slack)
    kinds: list[tuple[str, str]] = []

    async def record(body: JSON, event: JSON) -> None:
        kinds.append((event["type"], body["event_id"]))

    app.event("message")(record)
    app.event("app_mention")(record)
    async with serve_http(app, slack):
        delivered = await slack.user_message("U1", "C1", "<@UBOT> plan it", channel_type="channel")
        assert delivered.mention is not None
        assert delivered.mention.event["type"] == "app_mention"
        assert delivered.mention.event["ts"] == delivered.event["ts"]
        await slack.wait_for(lambda: len(kinds) == 2)
    assert sorted(k for k, _ in kinds) == ["app_mention", "message"]
    assert kinds[0][1] != kinds[1][1]


@pytest.mark.anyio
async def test_http_slash_command_and_button_with_response_url(slack: SlackEmulator) -> None:
    app = bolt_app(slack)

    async def on_command(ack: Any, command: JSON, respond: Any) -> None:
        await ack(f"listing for {command['user_id']}")
        await respond(text="later, in channel", response_type="in_channel")

    async def on_approve(ack: Any, body: JSON, respond: Any) -> None:
        await ack()
        await respond(text=f"approved by {body['user']['id']}", replace_original=True)

    app.command("/harness")(on_command)
    app.action("approve")(on_approve)
    async with serve_http(app, slack):
        result = await slack.slash_command("/harness", "list", "U1", "C1")
        assert result.status == 200
        assert result.response_payload == {"text": "listing for U1"}
        assert [e["text"] for e in slack.ephemeral("U1")] == ["listing for U1"]
        await slack.wait_for(lambda: [m for m in slack.messages("C1") if "later" in m["text"]])

        posted = await client_for(slack).chat_postMessage(
            channel="C1",
            text="approve?",
            blocks=[
                {
                    "type": "actions",
                    "block_id": "gate",
                    "elements": [{"type": "button", "action_id": "approve", "value": "yes"}],
                }
            ],
        )
        clicked = await slack.block_action("U2", "C1", posted["ts"], "approve", "yes")
        assert clicked.status == 200
        assert clicked.payload["actions"][0]["block_id"] == "gate"
        await slack.wait_for_call("response_url", lambda c: c.params.get("replace_original"))
        assert slack.thread("C1", posted["ts"])[0]["text"] == "approved by U2"


# --------------------------------------------------------------------------- Socket Mode


@pytest.mark.anyio
async def test_socket_mode_event_is_acked_and_answered(slack: SlackEmulator) -> None:
    app = bolt_app(slack)
    reply_in_thread(app)
    async with serve_socket(app):
        assert slack.calls("apps.connections.open")[0].ok
        delivered = await slack.user_message("U1", "D1", "hello socket")
        assert delivered.ack == {"envelope_id": delivered.envelope_id}
        assert slack.acks() == [delivered.ack]
        ts = delivered.event["ts"]
        await slack.wait_for(lambda: len(slack.thread("D1", ts)) == 2)
        assert slack.thread("D1", ts)[1]["text"] == "echo: hello socket"


@pytest.mark.anyio
async def test_socket_mode_slash_command_is_acked_with_payload(slack: SlackEmulator) -> None:
    app = bolt_app(slack)

    async def on_command(ack: Any, command: JSON) -> None:
        await ack(text=f"ok: {command['text']}")

    app.command("/harness")(on_command)
    async with serve_socket(app):
        result = await slack.slash_command("/harness", "tasks", "U1", "C1")
    assert result.ack is not None and result.ack["envelope_id"] == result.envelope_id
    assert result.response_payload == {"text": "ok: tasks"}
    assert [e["text"] for e in slack.ephemeral("U1")] == ["ok: tasks"]


@pytest.mark.anyio
async def test_socket_disconnect_makes_the_client_reconnect(slack: SlackEmulator) -> None:
    app = bolt_app(slack)
    reply_in_thread(app)
    async with serve_socket(app):
        await slack.wait_for(lambda: slack.socket_connections == 1)
        await slack.disconnect_socket()
        await slack.wait_for(lambda: slack.socket_connections == 2)
        assert len(slack.calls("apps.connections.open")) == 2
        delivered = await slack.user_message("U1", "D1", "after reconnect")
        assert delivered.acked
        ts = delivered.event["ts"]
        await slack.wait_for(lambda: len(slack.thread("D1", ts)) == 2)


@pytest.mark.anyio
async def test_socket_retry_carries_retry_attempt(slack: SlackEmulator) -> None:
    app = bolt_app(slack)
    retries: list[str | None] = []

    async def on_message(request: Any) -> None:
        retries.append((request.headers.get("x-slack-retry-num") or [None])[0])

    app.event("message")(on_message)
    async with serve_socket(app):
        first = await slack.user_message("U1", "D1", "hello")
        again = await slack.deliver_event(first.event, retry_of=first)
        assert again.acked and again.event_id == first.event_id
        await slack.wait_for(lambda: len(retries) == 2)
    # First deliveries carry retry_attempt 0, which Bolt turns into x-slack-retry-num: 0.
    assert retries == ["0", "1"]


# --------------------------------------------------------------------------- sync use, transcript


def test_in_thread_serves_synchronous_callers() -> None:
    emulator = SlackEmulator(bot_token=BOT_TOKEN, delivery="none")
    lines: list[str] = []
    emulator.on_call(lambda call: lines.append(line) if (line := transcript_line(call)) else None)
    with emulator.in_thread() as slack:
        client = WebClient(token=BOT_TOKEN, base_url=slack.api_url)
        delivered = slack.call(slack.user_message("U1", "D1", "build it"))
        ts = delivered.event["ts"]
        client.chat_postMessage(channel="D1", thread_ts=ts, text="✅ developer finished")
        call = slack.call(slack.wait_for_call("chat.postMessage"))
        assert call.params["thread_ts"] == ts
        assert [m["text"] for m in slack.thread("D1", ts)] == ["build it", "✅ developer finished"]
    assert lines == [f"#D1 thread {ts} | bot: ✅ developer finished"]


def test_transcript_lines() -> None:
    def call(method: str, params: JSON, response: JSON | None = None) -> ApiCall:
        return ApiCall(method, params, 0.0, 200, response or {"ok": True})

    blocks = [{"type": "section", "text": {"type": "mrkdwn", "text": "*Result*\nall   good"}}]
    assert (
        transcript_line(
            call("chat.postMessage", {"channel": "C1", "blocks": blocks}, {"ok": True, "ts": "1.2"})
        )
        == "#C1 1.2 | bot: *Result* all good"
    )
    long = call("chat.update", {"channel": "C1", "ts": "1.2", "text": "x" * 300})
    line = transcript_line(long, width=20)
    assert line is not None and line.endswith("x…") and len(line.split(": ", 1)[1]) == 20
    react = call("reactions.add", {"channel": "C1", "timestamp": "1.2", "name": "eyes"})
    assert transcript_line(react) == "#C1 1.2 | bot reacted :eyes:"
    limited = ApiCall(
        "chat.postMessage", {"channel": "C1"}, 0.0, 429, {"ok": False, "error": "ratelimited"}
    )
    assert transcript_line(limited) == "#C1 | chat.postMessage failed: ratelimited (HTTP 429)"
    assert transcript_line(call("auth.test", {})) is None


@pytest.mark.anyio
async def test_wait_for_times_out_with_a_dump(slack: SlackEmulator) -> None:
    await client_for(slack).auth_test()
    with pytest.raises(TimeoutError, match=r"auth\.test"):
        await slack.wait_for(lambda: slack.calls("chat.postMessage"), timeout=0.05)
