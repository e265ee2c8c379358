"""HTTP mode's front door: signed event callbacks are acked at once and handed to Bolt after.

Slack wants an answer within 3 s and a burst of events all at once is normal (a busy channel,
retries after an outage). Bolt's own handling of a request costs about half a millisecond of
the event loop before it acks, so 200 events at once would wait up to ~100 ms for their acks.
An event callback needs no answer beyond its HTTP 200, so once its signature checks out it is
acked here and queued; one worker hands the queue to Bolt in arrival order (so a thread's
messages keep their order). Everything else (slash commands, button clicks, URL checks,
anything unsigned or odd) goes through Bolt as it arrives, since its answer may carry content.
"""

from __future__ import annotations

import asyncio
import json
import logging
from dataclasses import dataclass

from aiohttp import web
from slack_bolt.adapter.aiohttp import to_aiohttp_response
from slack_bolt.app.async_app import AsyncApp
from slack_bolt.request.async_request import AsyncBoltRequest
from slack_sdk.signature import SignatureVerifier

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class _Received:
    """A request as it came; Bolt's view of it is built only when Bolt gets it."""

    body: str
    query: str
    headers: dict[str, str]

    def to_bolt(self) -> AsyncBoltRequest:
        return AsyncBoltRequest(body=self.body, query=self.query, headers=self.headers)  # type: ignore[arg-type]


class HttpIntake:
    def __init__(self, app: AsyncApp, signing_secret: str) -> None:
        self._app = app
        # Without a secret nothing can be checked here: every request goes through Bolt.
        self._verifier = SignatureVerifier(signing_secret) if signing_secret else None
        self._queue: asyncio.Queue[_Received] = asyncio.Queue()
        self._worker: asyncio.Task[None] | None = None

    async def handle(self, request: web.Request) -> web.StreamResponse:
        received = _Received(await request.text(), request.query_string, dict(request.headers))
        if self._is_signed_event(request, received.body):
            self._queue.put_nowait(received)
            if self._worker is None or self._worker.done():
                self._worker = asyncio.create_task(self._work(), name="slack event intake")
            return web.Response(status=200)
        return await to_aiohttp_response(await self._app.async_dispatch(received.to_bolt()))

    async def drain(self) -> None:
        """Hands Bolt every event acked so far, then stops the worker."""
        while not self._queue.empty():
            await self._dispatch(self._queue.get_nowait())
        if self._worker is not None:
            self._worker.cancel()
            await asyncio.gather(self._worker, return_exceptions=True)

    def _is_signed_event(self, request: web.Request, body: str) -> bool:
        if self._verifier is None or request.content_type != "application/json":
            return False
        try:
            kind = json.loads(body).get("type")
            signed = self._verifier.is_valid(
                body,
                request.headers.get("X-Slack-Request-Timestamp"),
                request.headers.get("X-Slack-Signature"),
            )
        except (ValueError, AttributeError):  # not JSON, not an object, a bad timestamp
            return False
        return kind == "event_callback" and signed

    async def _work(self) -> None:
        while True:
            await self._dispatch(await self._queue.get())
            # A queue with items in it answers get() without yielding: yield here, so the
            # requests that arrived meanwhile are acked before the next event is handled.
            await asyncio.sleep(0)

    async def _dispatch(self, received: _Received) -> None:
        try:
            # Bolt checks the signature again and runs the listeners in the background.
            await self._app.async_dispatch(received.to_bolt())
        except Exception:  # one bad event must not stop the intake of the next ones
            logger.exception("handing an acked event to Bolt failed")
