"""HTTP mode's front door: every request is checked here, and signed event callbacks are
acked at once and handed to Bolt after.

``check_request`` (pure) decides what a request is before anything reads it: its signature
first (unsigned, forged, replayed or badly stamped: 401), then its size (413) and its shape
(signed but malformed: 400), so a hostile or broken request gets a short plain answer and one
warning line, never a traceback and never its body in the log. Only requests shaped as Bolt
and the bot's listeners expect reach Bolt.

Slack wants an answer within 3 s and a burst of events all at once is normal (a busy channel,
retries after an outage). Bolt's own handling of a request costs about half a millisecond of
the event loop before it acks, so 200 events at once would wait up to ~100 ms for their acks.
An event callback needs no answer beyond its HTTP 200, so once it checks out it is acked here
and queued; one worker hands the queue to Bolt in arrival order (so a thread's messages keep
their order). Everything else (slash commands, button clicks, URL checks) goes through Bolt as
it arrives, since its answer may carry content.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl

from aiohttp import web
from slack_bolt.adapter.aiohttp import to_aiohttp_response
from slack_bolt.app.async_app import AsyncApp
from slack_bolt.request.async_request import AsyncBoltRequest
from slack_sdk.signature import Clock, SignatureVerifier

from bot.replica_forward import answer_handed_command, read_letter
from harness.clock import SYSTEM
from harness.clock import Clock as HarnessClock
from harness.waits import cancel_surely

logger = logging.getLogger(__name__)

MAX_BODY = 1024 * 1024  # Slack's payloads are a few kB; aiohttp's own default limit
MAX_AGE = 5 * 60  # seconds a signed request stays valid (Slack's advice, and Bolt's)
JSON_TYPE = "application/json"
FORM_TYPE = "application/x-www-form-urlencoded"
_TIMESTAMP = re.compile(r"[0-9]{1,12}")
# Fields Bolt reads an id from: a string, or an object with an "id".
_ID_FIELDS = ("user", "channel", "team", "enterprise")
# Objects Bolt looks into for those ids.
_NESTED = ("event", "message", "previous_message", "item", "assistant_thread")


@dataclass(frozen=True)
class Problem:
    """Why a request is refused: the HTTP status and a short reason, fit for the answer's
    body and for the log (it never quotes the request)."""

    status: int
    reason: str


@dataclass(frozen=True)
class Accepted:
    """A request that checked out: its kind (``event_callback``, ``url_verification``,
    ``block_actions``, ``command``, ``ssl_check``, ...) and its body as text."""

    kind: str
    body: str


class _At(Clock):
    def __init__(self, now: float) -> None:
        self._now = now

    def now(self) -> float:
        return self._now


def check_request(
    content_type: str | None,
    body: bytes,
    timestamp: str | None,
    signature: str | None,
    *,
    signing_secret: str,
    now: float,
) -> Accepted | Problem:
    """What a request to ``/slack/events`` is: ``Accepted``, or the ``Problem`` to answer."""
    if len(body) > MAX_BODY:
        return Problem(413, "request body too large")
    mime = (content_type or "").split(";")[0].strip().lower()
    text = body.decode("utf-8", errors="replace")
    if mime == FORM_TYPE and dict(parse_qsl(text)).get("ssl_check") == "1":
        # Slack's certificate check: answered with an empty 200, nothing in it is read (Bolt
        # answers it before checking signatures, too).
        return Accepted("ssl_check", "")
    problem = _check_signature(text, timestamp, signature, signing_secret, now)
    if problem is not None:
        return problem
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        return Problem(400, "request body is not UTF-8")
    if not text.strip():
        return Problem(400, "empty request body")
    if mime == JSON_TYPE:
        payload = _json_object(text, "request body")
    elif mime == FORM_TYPE:
        fields = dict(parse_qsl(text, keep_blank_values=True))
        if "payload" in fields:  # an interaction: the JSON is in the field
            payload = _json_object(fields["payload"], "payload")
        elif "command" in fields:  # a slash command: form fields, all of them strings
            return Accepted("command", text)
        else:
            return Problem(400, "form body is neither a command nor an interaction payload")
    else:
        return Problem(400, f"unsupported content type (want {JSON_TYPE} or {FORM_TYPE})")
    if isinstance(payload, Problem):
        return payload
    return _check_payload(payload) or Accepted(str(payload["type"]), text)


def _check_signature(
    text: str, timestamp: str | None, signature: str | None, secret: str, now: float
) -> Problem | None:
    if not secret:
        return Problem(401, "no signing secret is configured: nothing can be verified")
    if not timestamp or not signature:
        return Problem(401, "missing X-Slack-Request-Timestamp or X-Slack-Signature")
    if not _TIMESTAMP.fullmatch(timestamp):
        return Problem(401, "invalid X-Slack-Request-Timestamp")
    if abs(now - int(timestamp)) > MAX_AGE:
        return Problem(401, "X-Slack-Request-Timestamp is more than 5 minutes off")
    # hmac.compare_digest refuses non-ASCII strings; such a signature is not Slack's anyway.
    if not signature.isascii():
        return Problem(401, "invalid signature")
    if not SignatureVerifier(secret, clock=_At(now)).is_valid(text, timestamp, signature):
        return Problem(401, "invalid signature")
    return None


def _json_object(text: str, what: str) -> dict[str, Any] | Problem:
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):  # RecursionError: nested past Python's stack
        return Problem(400, f"{what} is not JSON")
    if not isinstance(value, dict):
        return Problem(400, f"{what} is not a JSON object")
    return value


def _check_payload(payload: Mapping[str, Any]) -> Problem | None:
    """The shape Bolt and the bot's listeners rely on, for the kinds they read."""
    kind = payload.get("type")
    if not isinstance(kind, str) or not kind:
        return Problem(400, "payload has no type")
    problem = _check_ids(payload, depth=3)
    if problem is not None:
        return problem
    for name in ("authorizations", "response_urls"):
        listed = payload.get(name)
        if listed is not None and not _objects(listed):
            return Problem(400, f"{name} is not a list of objects")
    if kind == "url_verification" and not isinstance(payload.get("challenge"), str):
        return Problem(400, "url_verification without a challenge")
    if kind == "event_callback":
        event = payload.get("event")
        if not isinstance(event, dict) or not isinstance(event.get("type"), str):
            return Problem(400, "event_callback without an event object")
    if kind == "block_actions":
        return _check_block_actions(payload)
    return None


def _check_ids(value: Mapping[str, Any], depth: int) -> Problem | None:
    for name in _ID_FIELDS:
        field = value.get(name)
        if field is not None and not isinstance(field, str | dict):
            return Problem(400, f"{name} is neither an id nor an object")
    if depth > 0:
        for name in _NESTED:
            nested = value.get(name)
            if isinstance(nested, dict) and (problem := _check_ids(nested, depth - 1)):
                return problem
    return None


def _objects(value: object) -> bool:
    return isinstance(value, list) and all(isinstance(v, dict) for v in value)


def _check_block_actions(payload: Mapping[str, Any]) -> Problem | None:
    actions = payload.get("actions")
    if not actions or not _objects(actions):
        return Problem(400, "block_actions without a list of actions")
    if not all(isinstance(a.get("action_id"), str) for a in actions):
        return Problem(400, "an action without an action_id")
    user = payload.get("user")
    if not isinstance(user, dict) or not isinstance(user.get("id"), str):
        return Problem(400, "block_actions without a user")
    for name in ("channel", "container", "message"):
        if not isinstance(payload.get(name) or {}, dict):
            return Problem(400, f"{name} is not an object")
    # The bot answers a click on a message through its response_url (Slack sends one with
    # every such click); a click in the Home tab (a view) comes without one.
    on_view = (payload.get("container") or {}).get("type") == "view"
    if not on_view and not isinstance(payload.get("response_url"), str):
        return Problem(400, "block_actions without a response_url")
    return None


# Hands a request to the replica that holds its thread (kind, body, query, headers): False
# when it is this replica's to handle.
Forward = Callable[[str, str, str, Mapping[str, str]], Awaitable[bool]]


@dataclass(frozen=True)
class _Received:
    """A request that checked out; Bolt's view of it is built only when Bolt gets it.
    ``handed``: another replica handed it here (it is never handed on again)."""

    body: str
    query: str
    headers: dict[str, str]
    kind: str = ""
    handed: bool = False

    def to_bolt(self) -> AsyncBoltRequest:
        return AsyncBoltRequest(body=self.body, query=self.query, headers=self.headers)  # type: ignore[arg-type]


class HttpIntake:
    """``clock``'s wall time says how old a request's signed timestamp is."""

    def __init__(
        self,
        app: AsyncApp,
        signing_secret: str,
        clock: HarnessClock = SYSTEM,
        forward: Forward | None = None,
    ) -> None:
        self._app = app
        self._forward = forward
        self._clock = clock
        # Without a secret nothing can be verified: every request is refused (401).
        self._secret = signing_secret
        self._queue: asyncio.Queue[_Received] = asyncio.Queue()
        self._worker: asyncio.Task[None] | None = None

    async def handle(self, request: web.Request) -> web.StreamResponse:
        checked = await self._check(request)
        if isinstance(checked, Problem):
            logger.warning("refused a Slack request: %d %s", checked.status, checked.reason)
            return web.Response(status=checked.status, text=checked.reason)
        if checked.kind == "ssl_check":
            return web.Response(status=200)
        received = _Received(
            checked.body, request.query_string, dict(request.headers), checked.kind
        )
        if checked.kind == "event_callback":
            self._enqueue(received)
            return web.Response(status=200)
        if await self._handed_on(received):
            return web.Response(status=200)  # that replica answers the click in the thread
        return await to_aiohttp_response(await self._app.async_dispatch(received.to_bolt()))

    async def take_letter(self, data: bytes) -> None:
        """A request another replica handed here (checked there; Bolt checks its signature
        again): handled as if it had come in here."""
        letter = read_letter(data)
        received = _Received(
            letter["body"], letter["query"], letter["headers"], letter["kind"], handed=True
        )
        if received.kind == "event_callback":
            self._enqueue(received)
        elif received.kind == "command":  # acked there: the answer goes by its response_url
            await answer_handed_command(received.body, await self._app.async_dispatch(
                received.to_bolt()))  # fmt: skip
        else:
            await self._dispatch(received)

    def _enqueue(self, received: _Received) -> None:
        self._queue.put_nowait(received)
        if self._worker is None or self._worker.done():
            self._worker = asyncio.create_task(self._work(), name="slack event intake")

    async def _handed_on(self, received: _Received) -> bool:
        if self._forward is None or received.handed:
            return False
        return await self._forward(received.kind, received.body, received.query, received.headers)

    async def drain(self) -> None:
        """Hands Bolt every event acked so far, then stops the worker."""
        while not self._queue.empty():
            await self._dispatch(self._queue.get_nowait())
        if self._worker is not None:  # a loop with nothing to clean up on its way out
            await cancel_surely(self._worker)

    async def _check(self, request: web.Request) -> Accepted | Problem:
        too_large = Problem(413, "request body too large")
        if request.content_length is not None and request.content_length > MAX_BODY:
            return too_large  # not read at all
        try:
            body = await request.read()
        except web.HTTPRequestEntityTooLarge:  # a chunked body past aiohttp's own limit
            return too_large
        return check_request(
            request.headers.get("Content-Type"),
            body,
            request.headers.get("X-Slack-Request-Timestamp"),
            request.headers.get("X-Slack-Signature"),
            signing_secret=self._secret,
            now=self._clock.now().timestamp(),
        )

    async def _work(self) -> None:
        while True:
            await self._dispatch(await self._queue.get())
            # A queue with items in it answers get() without yielding: yield here, so the
            # requests that arrived meanwhile are acked before the next event is handled.
            await asyncio.sleep(0)

    async def _dispatch(self, received: _Received) -> None:
        try:
            if received.kind == "event_callback" and await self._handed_on(received):
                return
            # Bolt checks the signature again and runs the listeners in the background.
            await self._app.async_dispatch(received.to_bolt())
        except Exception:  # one bad event must not stop the intake of the next ones
            logger.exception("handing an acked event to Bolt failed")
