"""Socket Mode's front door with bot replicas: each replica keeps one connection, Slack hands
each envelope to one of them, and a request about a thread whose agent another replica holds
is handed to that replica (``bot/replica_forward.py``) and acked here. Without replicas it is
Bolt's handler as it is."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlencode

from slack_bolt.adapter.socket_mode.async_handler import AsyncSocketModeHandler
from slack_bolt.app.async_app import AsyncApp
from slack_bolt.request.async_request import AsyncBoltRequest
from slack_sdk.socket_mode.async_client import AsyncBaseSocketModeClient
from slack_sdk.socket_mode.request import SocketModeRequest
from slack_sdk.socket_mode.response import SocketModeResponse

from bot.http_intake import Forward
from bot.replica_forward import answer_handed_command, payload_of, read_letter

RETRY_NUM = "x-slack-retry-num"
RETRY_REASON = "x-slack-retry-reason"


def as_request(envelope_type: str, payload: Mapping[str, Any]) -> tuple[str, str] | None:
    """An envelope as the kind and body an HTTP request of it has (what ``Forward`` reads),
    for the kinds that may belong to a thread; None for the others."""
    if envelope_type == "events_api":
        return "event_callback", json.dumps(payload)
    if envelope_type == "interactive" and payload.get("type") == "block_actions":
        return "block_actions", urlencode({"payload": json.dumps(payload)})
    if envelope_type == "slash_commands":
        return "command", urlencode({k: str(v) for k, v in payload.items()})
    return None


class SocketIntake(AsyncSocketModeHandler):
    def __init__(self, app: AsyncApp, app_token: str, forward: Forward | None = None) -> None:
        super().__init__(app, app_token)
        self._forward = forward

    async def handle(self, client: AsyncBaseSocketModeClient, req: SocketModeRequest) -> None:
        request = as_request(req.type, req.payload) if self._forward is not None else None
        if request is not None and self._forward is not None:
            headers = {RETRY_NUM: str(req.retry_attempt)} if req.retry_attempt else {}
            if req.retry_reason:
                headers[RETRY_REASON] = req.retry_reason
            if await self._forward(*request, "", headers):
                await client.send_socket_mode_response(SocketModeResponse(req.envelope_id))
                return
        await super().handle(client, req)  # type: ignore[arg-type]

    async def take_letter(self, data: bytes) -> None:
        """A request another replica handed here: to Bolt as if its envelope came in here."""
        letter = read_letter(data)
        body = dict(payload_of(letter["kind"], letter["body"]))
        headers = {k: v for k, v in letter["headers"].items() if k in (RETRY_NUM, RETRY_REASON)}
        request = AsyncBoltRequest(mode="socket_mode", body=body, headers=headers or None)  # type: ignore[arg-type]
        response = await self.app.async_dispatch(request)
        if letter["kind"] == "command":  # acked there: the answer goes by its response_url
            await answer_handed_command(letter["body"], response)
