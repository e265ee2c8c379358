"""How the Slack emulator hands the bot its events, commands and clicks: signed HTTP POSTs to
the bot's URL, Socket Mode envelopes, or nothing; and what was delivered."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Literal
from urllib.parse import urlencode

import aiohttp

from bot.testing.slack_model import JSON, DeliveredEvent, Identity, sign
from bot.testing.slack_payloads import envelope, event_callback, new_id

logger = logging.getLogger(__name__)
FORM = "application/x-www-form-urlencoded"
Mode = Literal["http", "socket", "none"]


class BotDelivery:
    """Delivers to the bot: by HTTP to `bot_url`, or as envelopes `send_envelope` sends over
    Socket Mode; `changed` wakes the waiters after each delivery."""

    def __init__(
        self,
        identity: Identity,
        send_envelope: Callable[[JSON], Awaitable[JSON | None]],
        changed: Callable[[], Awaitable[None]],
        *,
        bot_url: str | None = None,
        mode: Mode | None = None,
        http_timeout: float = 10.0,
    ) -> None:
        self.identity = identity
        self.bot_url = bot_url
        self._mode = mode
        self.http_timeout = http_timeout
        self._send_envelope = send_envelope
        self._changed = changed
        self._session: aiohttp.ClientSession | None = None
        self._deliveries: list[DeliveredEvent] = []

    @property
    def mode(self) -> str:
        """`http` (signed POSTs to `bot_url`), `socket`, or `none` (store, deliver nothing).

        By default http when `bot_url` is set, else socket."""
        return self._mode or ("http" if self.bot_url else "socket")

    @mode.setter
    def mode(self, mode: Mode | None) -> None:
        self._mode = mode

    async def start(self) -> None:
        timeout = aiohttp.ClientTimeout(total=self.http_timeout)
        self._session = aiohttp.ClientSession(timeout=timeout)

    async def stop(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    def deliveries(self, kind: str | None = None) -> list[DeliveredEvent]:
        return [d for d in list(self._deliveries) if kind is None or d.kind == kind]

    async def post_signed(
        self,
        body: bytes,
        *,
        content_type: str,
        signature_override: str | None = None,
        timestamp_override: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> tuple[int, str]:
        """POSTs a raw body to `bot_url`, signed like Slack (unless overridden)."""
        if self._session is None or not self.bot_url:
            raise RuntimeError("post_signed needs a started emulator and a bot_url")
        timestamp = timestamp_override or str(int(time.time()))
        signature = signature_override or sign(self.identity.signing_secret, timestamp, body)
        all_headers = {
            "Content-Type": content_type,
            "X-Slack-Request-Timestamp": timestamp,
            "X-Slack-Signature": signature,
            **(headers or {}),
        }
        async with self._session.post(self.bot_url, data=body, headers=all_headers) as resp:
            return resp.status, await resp.text()

    async def deliver(
        self,
        kind: str,
        payload: JSON,
        *,
        event_id: str | None = None,
        retry_num: int = 0,
        retry_reason: str | None = None,
    ) -> DeliveredEvent:
        """Delivers one payload of `kind` ("events_api", "slash_commands", "interactive")."""
        delivered = DeliveredEvent(kind, payload, event_id=event_id, retry_num=retry_num)
        if self.mode == "http":
            if kind == "events_api":
                body, ctype = json.dumps(payload).encode(), "application/json"
            elif kind == "slash_commands":
                body, ctype = urlencode(payload).encode(), FORM
            else:
                body, ctype = urlencode({"payload": json.dumps(payload)}).encode(), FORM
            headers = {}
            if retry_num:
                headers["X-Slack-Retry-Num"] = str(retry_num)
                headers["X-Slack-Retry-Reason"] = retry_reason or "http_timeout"
            try:
                delivered.status, delivered.body = await self.post_signed(
                    body, content_type=ctype, headers=headers
                )
            except (aiohttp.ClientError, TimeoutError) as exc:
                logger.warning("Slack emulator: delivery to %s failed: %r", self.bot_url, exc)
                delivered.body = repr(exc)
        elif self.mode == "socket":
            reason = (retry_reason or "timeout") if retry_num else ""
            env = envelope(kind, payload, retry_attempt=retry_num, retry_reason=reason)
            delivered.envelope_id = env["envelope_id"]
            delivered.ack = await self._send_envelope(env)
        self._deliveries.append(delivered)
        await self._changed()
        return delivered

    async def deliver_event(
        self,
        event: JSON,
        *,
        retry_of: DeliveredEvent | None = None,
        retry_reason: str | None = None,
    ) -> DeliveredEvent:
        """Delivers a raw event; `retry_of` re-sends it with the same event_id, retry_num + 1."""
        if retry_of is None:
            event_id = new_id("Ev")
            payload = event_callback(self.identity, event, event_id)
            return await self.deliver("events_api", payload, event_id=event_id)
        payload = {**retry_of.payload, "event": event}
        return await self.deliver(
            "events_api",
            payload,
            event_id=retry_of.event_id,
            retry_num=retry_of.retry_num + 1,
            retry_reason=retry_reason,
        )
