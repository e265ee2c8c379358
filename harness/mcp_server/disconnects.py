"""Clients that go away mid-request, at the ASGI layer of ``harness mcp --transport http``.

A client may drop its connection at any moment: while its request's body arrives (a client
killed or cancelled as it sends), or while its call runs. The MCP SDK reads the body inside
its transport, where a disconnect becomes a ``ClientDisconnect`` that it, or the ASGI server,
logs as a traceback. Nothing is wrong with the server then, so this layer, inside the bearer
check (only people with a token get here), reads an authenticated request's body whole
before the SDK sees it: a client gone before its request arrived is one INFO line, and the
request never reaches the SDK. A disconnect error that still comes out of the app once its
client is gone (a stream closed under a call) is one INFO line too; any other error goes on
up as it is.
"""

from __future__ import annotations

import logging
from collections import deque

import anyio
from mcp.server.transport_security import DEFAULT_MAX_REQUEST_BODY_SIZE
from starlette.requests import ClientDisconnect
from starlette.types import ASGIApp, Message, Receive, Scope, Send

logger = logging.getLogger(__name__)

# What an app raises when its client went away under it.
_GONE = (ClientDisconnect, anyio.ClosedResourceError, anyio.BrokenResourceError)


def only_disconnects(exc: BaseException) -> bool:
    """Whether ``exc`` (or every error of an exception group) says the client went away."""
    if isinstance(exc, BaseExceptionGroup):
        return all(only_disconnects(inner) for inner in exc.exceptions)
    return isinstance(exc, _GONE)


class ClientGone:
    """ASGI middleware: a client that went away is a line in the log, not a traceback."""

    def __init__(self, app: ASGIApp, max_body: int = DEFAULT_MAX_REQUEST_BODY_SIZE) -> None:
        self.app = app
        self.max_body = max_body

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        user = scope.get("user") if scope["type"] == "http" else None
        if not getattr(user, "is_authenticated", False):
            await self.app(scope, receive, send)  # refused by the bearer check, unread
            return
        gone = False
        buffered: deque[Message] = deque()
        size = 0
        while True:  # the body, whole (what is past the limit is the SDK's to refuse)
            message = await receive()
            if message["type"] == "http.disconnect":
                logger.info("%s went away before its request to %s arrived whole",
                            _who(scope), scope.get("path"))  # fmt: skip
                return
            buffered.append(message)
            size += len(message.get("body", b""))
            if not message.get("more_body", False) or size > self.max_body:
                break

        async def replay() -> Message:
            nonlocal gone
            message = buffered.popleft() if buffered else await receive()
            gone = gone or message["type"] == "http.disconnect"
            return message

        try:
            await self.app(scope, replay, send)
        except Exception as exc:
            if not (gone and only_disconnects(exc)):
                raise
            logger.info("%s went away mid-call (%s)", _who(scope), type(exc).__name__)


def _who(scope: Scope) -> str:
    """The client, by its token's user (an id: never the token)."""
    return f"MCP client of {getattr(scope.get('user'), 'display_name', '') or '?'}"
