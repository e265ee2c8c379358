"""Posting into Slack threads: the Web API calls whose failure costs nothing lasting (status
edits, 👀, ephemeral replies, questions), with failures logged rather than raised, and what a
failed call means (``classify``, whatever Slack or a proxy answered: JSON, an HTML or text
page, bytes, nothing, a reset or a timeout). What the bot owes a thread goes through
``bot.outbox``. ``SlackClient`` is the Web API client that fails only with ``CALL_ERRORS``;
``retry_transient`` tries a call again while it fails transiently (a post an agent waits
on, the last append of a streamed reply).

Rate limits are handled by the client's retry handler (see bot.app.make_client). A post is
not idempotent: one whose answer never came (a timeout, a reset) may have been made, so every
post carries a key in its message metadata (``post_keyed``) and a retry looks for that key in
the thread before posting again; the client's own retry of connection errors leaves posts to
it. The poster also remembers the newest message it knows of in each thread, so a status message is
replaced in place only when nothing came after it; otherwise the result is posted at the
end of the thread, where people read.
"""

from __future__ import annotations

import logging
import re
import uuid
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, TypeVar

import aiohttp
from slack_sdk.errors import SlackApiError, SlackClientError
from slack_sdk.http_retry.builtin_async_handlers import AsyncConnectionErrorRetryHandler
from slack_sdk.http_retry.request import HttpRequest
from slack_sdk.http_retry.state import RetryState
from slack_sdk.web.async_client import AsyncWebClient
from slack_sdk.web.async_slack_response import AsyncSlackResponse

from bot.blocks import SlackMessage
from harness.errors import HarnessError
from harness.retry import Backoff, retrying
from harness.tasks.model import ThreadRef

logger = logging.getLogger(__name__)

R = TypeVar("R")

# A post an agent waits on is tried again after 0.5 s, 1 s, 2 s...
_POST_BACKOFF = Backoff(first=0.5, cap=8.0)

# What a failed call can raise: Slack errors, transport errors, timeouts.
CALL_ERRORS = (SlackApiError, SlackClientError, aiohttp.ClientError, TimeoutError, OSError)
# `ok: false` errors that say "try again later"; any other error will not go away by itself.
TRANSIENT_ERRORS = frozenset(
    {
        "ratelimited",
        "rate_limited",
        "internal_error",
        "fatal_error",
        "service_unavailable",
        "request_timeout",
        "timeout",
        "team_added_to_org",
        "accesslimited",
    }
)


class DeliveryError(HarnessError):
    """A Web API call failed: ``error`` is Slack's error code (or the network's complaint);
    ``transient`` says whether trying again later can succeed."""

    def __init__(self, error: str, *, transient: bool) -> None:
        fix = "" if transient else "check the bot's access to the channel (is it a member?)"
        super().__init__(error, fix=fix)
        self.error = error
        self.transient = transient


# HTTP statuses worth trying again: Slack (or a proxy in front of it) is busy or down.
_TRANSIENT_STATUSES = frozenset({408, 425, 429})


def _excerpt(text: str, limit: int = 80) -> str:
    """A page's text on one line, cut short: enough to tell an HTML error page by."""
    flat = " ".join(re.sub(r"<[^>]*>", " ", text).split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def _status_of(response: object) -> int:
    """The HTTP status of a failed call's response: a SlackResponse (``status_code``), or the
    raw aiohttp response slack_sdk attaches when a body claimed JSON but was not (``status``)."""
    for name in ("status_code", "status"):
        status = getattr(response, name, None)
        if isinstance(status, int):
            return status
    return 200


def slack_error(exc: SlackApiError) -> str:
    """Slack's error code of a refused call, or what the HTTP answer was when its body is not
    Slack's JSON (an HTML or text page from Slack's edge or a proxy, bytes, nothing): never
    raises, whatever ``exc.response`` holds."""
    response = exc.response
    status = _status_of(response)
    data = getattr(response, "data", None)
    if isinstance(data, Mapping):
        error = data.get("error")
        if isinstance(error, str) and error:
            return error
        return f"HTTP {status}"
    if isinstance(data, (bytes, bytearray)):
        data = bytes(data).decode("utf-8", "replace")
    if isinstance(data, str) and data.strip():
        return f"HTTP {status}: {_excerpt(data)}"
    if data is None and not hasattr(response, "data"):
        # slack_sdk keeps only a note of a body that claimed JSON but was not.
        note = str(exc.args[0]) if exc.args else ""
        body = note.partition("non-JSON format:")[2].partition("The server responded with:")[0]
        return f"HTTP {status}: {_excerpt(body)}" if body.strip() else f"HTTP {status}"
    return f"HTTP {status}"


def classify(exc: BaseException) -> DeliveryError:
    """What a failed Web API call means for the outbox. Total: whatever the response of a
    ``SlackApiError`` holds (Slack's JSON, an HTML or text page, bytes, nothing), an answer,
    never an exception. HTTP 5xx, 408 and 429, ``ok: false`` errors Slack documents as
    temporary, network errors and timeouts are transient."""
    if isinstance(exc, SlackApiError):
        try:
            status = _status_of(exc.response)
            error = slack_error(exc)
        except (AttributeError, TypeError, ValueError):  # a response of a shape never seen
            return DeliveryError(f"{type(exc).__name__}: {_excerpt(str(exc))}", transient=True)
        transient = status >= 500 or status in _TRANSIENT_STATUSES or error in TRANSIENT_ERRORS
        return DeliveryError(error, transient=transient)
    if isinstance(exc, (SlackClientError, aiohttp.ClientError, TimeoutError, OSError)):
        name = type(exc).__name__
        return DeliveryError(f"{name}: {exc}" if str(exc) else name, transient=True)
    return DeliveryError(f"{type(exc).__name__}: {exc}", transient=False)


async def retry_transient(
    call: Callable[[], Awaitable[R]],
    *,
    attempts: int,
    backoff: Backoff,
    on_retry: Callable[[DeliveryError], None],
) -> R:
    """``call()``'s answer, tried again while it fails transiently (up to ``attempts`` tries,
    waiting as ``backoff`` says); ``on_retry`` is told each failure tried again. The failure
    that ends it, transient or not, is raised as a ``DeliveryError``."""
    try:
        return await retrying(
            call,
            retry_on=CALL_ERRORS,
            retry_if=lambda exc: classify(exc).transient,
            backoff=backoff,
            attempts=attempts,
            on_retry=lambda exc, _delay: on_retry(classify(exc)),
        )
    except CALL_ERRORS as exc:
        raise classify(exc) from exc


# The metadata event type that carries a post's key.
POST_KEY_EVENT = "harness_post"
# What slack_sdk retries once by itself (a reset or a dropped connection), posts aside.
_CONNECTION_LOST = (aiohttp.ServerConnectionError, aiohttp.ServerDisconnectedError,
                    aiohttp.ClientOSError)  # fmt: skip


async def find_keyed(client: AsyncWebClient, thread: ThreadRef, key: str) -> str | None:
    """The ts of the bot's message in ``thread`` that carries ``key``, if Slack has one."""
    response = await client.conversations_replies(
        channel=thread.channel, ts=thread.thread_ts, limit=1000, include_all_metadata=True
    )
    for message in response.get("messages") or []:
        metadata = message.get("metadata") if isinstance(message, dict) else None
        if not isinstance(metadata, dict) or metadata.get("event_type") != POST_KEY_EVENT:
            continue
        payload = metadata.get("event_payload")
        if isinstance(payload, dict) and payload.get("key") == key:
            ts = message.get("ts")
            return ts if isinstance(ts, str) else None
    return None


async def post_keyed(
    client: AsyncWebClient,
    thread: ThreadRef,
    message: SlackMessage | str,
    *,
    key: str,
    look_first: bool,
) -> Mapping[str, Any]:
    """``chat.postMessage`` into the thread carrying ``key``; with ``look_first`` (a try
    before may have been made, its answer lost), the message already there with that key is
    taken instead of a second one. A connection lost mid-call is tried again once, looking
    first (slack_sdk's own retry of it, made safe). Fails as ``CALL_ERRORS``."""
    if look_first and (found := await _posted(client, thread, key)) is not None:
        return found
    try:
        return await _send(client, thread, message, key)
    except _CONNECTION_LOST:
        if (found := await _posted(client, thread, key)) is not None:
            return found
        return await _send(client, thread, message, key)


async def _posted(client: AsyncWebClient, thread: ThreadRef, key: str) -> Mapping[str, Any] | None:
    """The answer a post with ``key`` would have had, when the thread has it already."""
    try:
        found = await find_keyed(client, thread, key)
    except SlackApiError as exc:
        if classify(exc).transient:
            raise
        return None  # the thread cannot be read: the post itself says what is wrong
    if found is None:
        return None
    logger.info("a post to %s was made, its answer lost: not made again", thread)
    return {"ok": True, "channel": thread.channel, "ts": found}


async def _send(
    client: AsyncWebClient, thread: ThreadRef, message: SlackMessage | str, key: str
) -> Mapping[str, Any]:
    response = await client.chat_postMessage(
        channel=thread.channel,
        thread_ts=thread.thread_ts,
        unfurl_links=False,
        unfurl_media=False,
        metadata={"event_type": POST_KEY_EVENT, "event_payload": {"key": key}},
        **message_content(message),
    )
    return response.data if isinstance(response.data, dict) else {}


# Calls that make a new message each time: one whose connection failed may have been made.
_MAKES_A_MESSAGE = ("/chat.postMessage", "/chat.startStream")


class _RetryConnectionsButPosts(AsyncConnectionErrorRetryHandler):
    """slack_sdk's retry of a call whose connection failed, except posts and new streams: the
    message may have been made, and only the bot's own retry (``post_keyed``,
    ``ReplyStream.start``) looks before making it again."""

    async def _can_retry_async(
        self, *, state: RetryState, request: HttpRequest, **kwargs: Any
    ) -> bool:
        if request.url.endswith(_MAKES_A_MESSAGE):
            return False
        return await super()._can_retry_async(state=state, request=request, **kwargs)


class SlackClient(AsyncWebClient):
    """The Web API client, made to fail the way ``CALL_ERRORS`` says whatever Slack answers:
    slack_sdk raises its own AttributeError or ValueError (not a Slack error) on a few answers
    that are not Slack's JSON, such as a text page with HTTP 200 (a proxy's login page) or
    binary bytes with a 5xx. Those become a ``SlackClientError``: transient, tried again.
    Every failed call is told to ``on_error`` (the bot counts them by method)."""

    on_error: Callable[[str], None] | None = None

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.retry_handlers = [
            _RetryConnectionsButPosts() if type(h) is AsyncConnectionErrorRetryHandler else h
            for h in self.retry_handlers
        ]

    async def api_call(self, api_method: str, **kwargs: Any) -> AsyncSlackResponse:
        try:
            return await super().api_call(api_method, **kwargs)
        except (AttributeError, ValueError) as exc:
            self._failed(api_method)
            raise SlackClientError(
                f"{api_method}: the answer was not Slack's JSON ({exc})"
            ) from exc
        except CALL_ERRORS:
            self._failed(api_method)
            raise

    def _failed(self, api_method: str) -> None:
        if self.on_error is not None:
            self.on_error(api_method)


def ts_key(ts: str) -> tuple[int, int]:
    whole, _, frac = ts.partition(".")
    try:
        return int(whole or 0), int((frac + "000000")[:6] or 0)
    except ValueError:
        return 0, 0


def message_content(message: SlackMessage | str) -> dict[str, Any]:
    if isinstance(message, str):
        return {"text": message}
    return {"text": message["text"], "blocks": message["blocks"]}


class Poster:
    def __init__(self, client: AsyncWebClient) -> None:
        self.client = client
        self._newest: dict[ThreadRef, str] = {}

    # -- what is the newest message of a thread

    def note(self, thread: ThreadRef, ts: str) -> None:
        newest = self._newest.get(thread)
        if newest is None or ts_key(ts) > ts_key(newest):
            self._newest[thread] = ts

    def is_newest(self, thread: ThreadRef, ts: str) -> bool:
        return self._newest.get(thread, ts) == ts

    # -- calls

    async def post(
        self, thread: ThreadRef, message: SlackMessage | str, *, attempts: int = 1
    ) -> str | None:
        """Posts into the thread; the new message's ts, or None when Slack refused it.
        With ``attempts`` > 1 a transient failure is tried again (after 0.5 s, 1 s, ...)."""

        key = uuid.uuid4().hex
        tries = 0

        def failed(error: DeliveryError) -> None:
            logger.warning("chat.postMessage to %s failed: %s", thread.channel, error.error)

        async def attempt() -> Mapping[str, Any]:
            nonlocal tries
            tries += 1
            return await post_keyed(self.client, thread, message, key=key, look_first=tries > 1)

        try:
            response = await retry_transient(
                attempt,
                attempts=attempts,
                backoff=_POST_BACKOFF,
                on_retry=failed,
            )
        except DeliveryError as error:
            failed(error)
            return None
        ts = response.get("ts")
        if isinstance(ts, str):
            self.note(thread, ts)
            return ts
        return None

    async def upload(
        self, thread: ThreadRef, filename: str, content: str | bytes, *, title: str, comment: str
    ) -> bool:
        """Shares ``content`` (text as UTF-8, or exact bytes) in the thread as a file; False
        when Slack refused it."""
        try:
            await self.client.files_upload_v2(
                channel=thread.channel,
                thread_ts=thread.thread_ts,
                filename=filename,
                content=content.encode("utf-8") if isinstance(content, str) else content,
                title=title,
                initial_comment=comment,
            )
        except CALL_ERRORS as exc:
            logger.warning(
                "uploading %s to %s failed: %s", filename, thread.channel, classify(exc).error
            )
            return False
        return True

    async def update(self, channel: str, ts: str, message: SlackMessage | str) -> bool:
        try:
            await self.client.chat_update(channel=channel, ts=ts, **message_content(message))
        except CALL_ERRORS as exc:
            logger.warning("chat.update of %s in %s failed: %s", ts, channel, classify(exc).error)
            return False
        return True

    async def react(self, channel: str, ts: str, name: str) -> None:
        try:
            await self.client.reactions_add(channel=channel, timestamp=ts, name=name)
        except CALL_ERRORS as exc:
            error = classify(exc).error
            if error != "already_reacted":
                logger.warning("reactions.add :%s: failed: %s", name, error)

    async def ephemeral(self, channel: str, user: str, text: str, thread_ts: str | None) -> None:
        try:
            await self.client.chat_postEphemeral(
                channel=channel, user=user, text=text, thread_ts=thread_ts
            )
        except CALL_ERRORS as exc:
            logger.warning("chat.postEphemeral to %s failed: %s", user, classify(exc).error)

    async def replies(self, thread: ThreadRef, limit: int = 1000) -> list[Mapping[str, Any]]:
        """The thread's messages, parent first (the first page: the newest context matters)."""
        try:
            response = await self.client.conversations_replies(
                channel=thread.channel, ts=thread.thread_ts, limit=limit
            )
        except CALL_ERRORS as exc:
            logger.warning("conversations.replies of %s failed: %s", thread, classify(exc).error)
            return []
        messages = response.get("messages")
        return [m for m in messages if isinstance(m, dict)] if isinstance(messages, list) else []

    async def channels_of(self, user: str) -> frozenset[str] | None:
        """The channels (public, private, group DMs) ``user`` is a member of; None when Slack
        would not say (then the caller shows less, not more)."""
        found: set[str] = set()
        cursor = ""
        try:
            while True:
                response = await self.client.users_conversations(
                    user=user,
                    types="public_channel,private_channel,mpim",
                    exclude_archived=True,
                    limit=200,
                    cursor=cursor or None,
                )
                found.update(str(c.get("id")) for c in response.get("channels") or [])
                cursor = str((response.get("response_metadata") or {}).get("next_cursor") or "")
                if not cursor:
                    return frozenset(found)
        except CALL_ERRORS as exc:
            logger.warning("users.conversations of %s failed: %s", user, classify(exc).error)
            return None

    async def permalink(self, thread: ThreadRef) -> str | None:
        try:
            response = await self.client.chat_getPermalink(
                channel=thread.channel, message_ts=thread.thread_ts
            )
        except CALL_ERRORS as exc:
            logger.debug("chat.getPermalink of %s failed: %s", thread, classify(exc).error)
            return None
        link = response.get("permalink")
        return link if isinstance(link, str) else None
