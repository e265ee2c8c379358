"""The server half of the loopback Slack emulator: state, HTTP routes, Socket Mode socket.

`bot.testing.slack_emulator.SlackEmulator` adds the simulated users and the observation helpers.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import socket
import struct
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from types import TracebackType
from typing import Literal, Self

import aiohttp
from aiohttp import web

from bot.testing.slack_api import WebApi, user_record
from bot.testing.slack_files import DOWNLOAD_ROUTE, SharedFiles
from bot.testing.slack_model import JSON, ApiCall, ApiError, DeliveredEvent, Identity, MessageStore

logger = logging.getLogger(__name__)
_DECODED = ("blocks", "attachments", "metadata", "files", "chunks", "prompts", "view")


@dataclass
class _Fault:
    status: int
    retry_after: int | None
    error: str
    # A raw body instead of Slack's JSON (an HTML or text page from Slack's edge or a proxy).
    body: str | bytes | None = None
    content_type: str = "text/html"
    # "reset": the connection is closed without an answer; "hang": no answer until the
    # client gives up (its timeout) or the emulator stops.
    drop: Literal["reset", "hang"] | None = None


@dataclass
class _Socket:
    ws: web.WebSocketResponse
    retired: bool = False


async def _read_params(request: web.Request) -> JSON:
    params: JSON = dict(request.query)
    if request.content_type == "application/json":
        body = await request.json() if request.can_read_body else {}
        params.update(body if isinstance(body, dict) else {})
    elif request.can_read_body:
        form = await request.post()
        params.update({k: v for k, v in form.items() if isinstance(v, str)})
    for key in _DECODED:
        if isinstance(params.get(key), str):
            with contextlib.suppress(ValueError):
                params[key] = json.loads(params[key])
    return params


def _abort(request: web.Request) -> None:
    """Closes the request's connection at once, with a TCP reset (no answer, no FIN)."""
    transport = request.transport
    if transport is None:
        return
    sock = transport.get_extra_info("socket")
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    transport.abort()


class EmulatorServer:
    """State and HTTP/WebSocket routes of the emulator (see `SlackEmulator`)."""

    def __init__(
        self,
        *,
        signing_secret: str = "emulator-signing-secret",
        bot_token: str = "xoxb-emulator",
        app_token: str = "xapp-emulator",
        bot_user_id: str = "UBOT",
        bot_id: str = "BBOT",
        team_id: str = "T1",
        app_id: str = "A1",
        bot_url: str | None = None,
        delivery: Literal["http", "socket", "none"] | None = None,
        port: int = 0,
        ack_timeout: float = 3.0,
        connect_timeout: float = 10.0,
        http_timeout: float = 10.0,
    ) -> None:
        self.identity = Identity(
            bot_token, app_token, signing_secret, bot_user_id, bot_id, team_id, app_id
        )
        self.bot_url = bot_url
        self._delivery = delivery
        self.ack_timeout = ack_timeout
        self.connect_timeout = connect_timeout
        self.http_timeout = http_timeout
        self.store = MessageStore()
        self.users: dict[str, JSON] = {
            bot_user_id: user_record(bot_user_id, team_id, self.identity.bot_name, is_bot=True)
        }
        self.api = WebApi(
            self.store,
            self.identity,
            self.users,
            self._issue_socket_url,
            lambda file_id: f"{self.base_url}/upload/{file_id}",
        )
        self.shared_files = SharedFiles(self.identity, lambda: self.base_url)
        self.api.methods["files.info"] = self.shared_files.info
        self._port = port
        self._calls: list[ApiCall] = []
        self._deliveries: list[DeliveredEvent] = []
        self._acks: list[JSON] = []
        self._faults: dict[str, list[_Fault]] = {}
        self._stalled: set[str] = set()
        self._stopping = asyncio.Event()
        self._unstalled = asyncio.Event()
        self._tickets: set[str] = set()
        self._sockets: list[_Socket] = []
        self._socket_count = 0
        self._ack_waiters: dict[str, asyncio.Future[JSON]] = {}
        self._response_urls: dict[str, JSON] = {}
        self._listeners: list[Callable[[ApiCall], None]] = []
        self._cond = asyncio.Condition()
        self._runner: web.AppRunner | None = None
        self._session: aiohttp.ClientSession | None = None
        self._thread_loop: asyncio.AbstractEventLoop | None = None
        self._thread_id: int | None = None

    # ------------------------------------------------------------------ lifecycle

    @property
    def port(self) -> int:
        return self._port

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._port}"

    @property
    def api_url(self) -> str:
        return f"{self.base_url}/api/"

    @property
    def delivery(self) -> str:
        """`http` (signed POSTs to `bot_url`), `socket`, or `none` (store, deliver nothing).

        By default http when `bot_url` is set, else socket."""
        return self._delivery or ("http" if self.bot_url else "socket")

    @delivery.setter
    def delivery(self, mode: Literal["http", "socket", "none"] | None) -> None:
        self._delivery = mode

    async def start(self) -> Self:
        self._cond = asyncio.Condition()
        self._stopping = asyncio.Event()
        app = web.Application()
        app.router.add_route("*", "/api/{method}", self._handle_api)
        app.router.add_get("/socket", self._handle_socket)
        app.router.add_post("/response_url/{rid}", self._handle_response_url)
        app.router.add_post("/upload/{file_id}", self._handle_upload)
        app.router.add_get(DOWNLOAD_ROUTE, self.shared_files.download)
        self._runner = web.AppRunner(app, access_log=None, shutdown_timeout=1.0)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", self._port)
        await site.start()
        self._port = int(self._runner.addresses[0][1])
        self._session = aiohttp.ClientSession(
            timeout=aiohttp.ClientTimeout(total=self.http_timeout)
        )
        logger.info("Slack emulator listening on %s", self.api_url)
        return self

    async def stop(self) -> None:
        self._stopping.set()
        for sock in list(self._sockets):
            await sock.ws.close(code=aiohttp.WSCloseCode.GOING_AWAY, message=b"server stopping")
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def __aenter__(self) -> Self:
        return await self.start()

    async def __aexit__(
        self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.stop()

    # ------------------------------------------------------------------ recording

    def on_call(self, listener: Callable[[ApiCall], None]) -> None:
        """Calls `listener` with every recorded call (e.g. to print `transcript_line`s)."""
        self._listeners.append(listener)

    async def _changed(self) -> None:
        async with self._cond:
            self._cond.notify_all()

    async def _record(self, method: str, params: JSON, status: int, response: JSON) -> None:
        call = ApiCall(method, params, time.time(), status, response)
        self._calls.append(call)
        for listener in self._listeners:
            try:
                listener(call)
            except Exception:
                logger.exception("Slack emulator call listener failed")
        await self._changed()

    def fail_next(
        self,
        method: str,
        times: int = 1,
        status: int = 429,
        retry_after: int | None = 1,
        error: str | None = None,
        *,
        body: str | bytes | None = None,
        content_type: str = "text/html",
    ) -> None:
        """Makes the next `times` calls of `method` fail: HTTP 429 + Retry-After by default
        (`retry_after=None`: a 429 without the header), or any status (200 with `error` for a
        Slack error such as "channel_not_found"). With `body`, the answer is that raw body as
        `content_type` instead of Slack's JSON: the HTML or text page Slack's edge or a proxy
        answers a 502/503 with ("" for an empty body)."""
        default = (
            "ratelimited" if status == 429 else "internal_error" if status >= 500 else "fatal_error"
        )
        fault = _Fault(status, retry_after, error or default, body, content_type)
        self._faults.setdefault(method, []).extend([fault] * times)

    def drop_next(self, method: str, times: int = 1, *, how: Literal["reset", "hang"]) -> None:
        """Makes the next `times` calls of `method` go unanswered: `reset` closes the
        connection at once (a reset by a proxy), `hang` keeps it open without a word until the
        client gives up on it (past its timeout)."""
        fault = _Fault(0, None, "dropped", drop=how)
        self._faults.setdefault(method, []).extend([fault] * times)

    def clear_faults(self) -> None:
        """Slack is healthy again: no more failures queued by `fail_next`."""
        self._faults.clear()

    def stall(self, *methods: str) -> None:
        """Calls of `methods` hang (no answer) until `unstall`: Slack not answering."""
        self._stalled.update(methods)
        self._unstalled.clear()

    def unstall(self) -> None:
        """Stalled calls are answered, and new ones no longer stall."""
        self._stalled.clear()
        self._unstalled.set()

    # ------------------------------------------------------------------ HTTP routes

    async def _handle_api(self, request: web.Request) -> web.StreamResponse:
        method = request.match_info["method"]
        try:
            params = await _read_params(request)
        except ValueError:
            await self._record(method, {}, 200, {"ok": False, "error": "invalid_json"})
            return web.json_response({"ok": False, "error": "invalid_json"})
        if method in self._stalled:
            await self._unstalled.wait()
        auth = request.headers.get("Authorization", "")
        token = auth[7:] if auth.startswith("Bearer ") else params.pop("token", None)
        params.pop("token", None)
        faults = self._faults.get(method)
        if faults:
            return await self._fail(request, method, params, faults.pop(0))
        try:
            body = self.api.handle(method, params, token)
        except ApiError as exc:
            body = {"ok": False, "error": exc.error, **exc.extra}
            if exc.status != 200:
                retry = {"Retry-After": str(exc.retry_after)}
                await self._record(method, params, exc.status, body)
                return web.json_response(body, status=exc.status, headers=retry)
        await self._record(method, params, 200, body)
        return web.json_response(body)

    async def _fail(
        self, request: web.Request, method: str, params: JSON, fault: _Fault
    ) -> web.StreamResponse:
        body: JSON = {"ok": False, "error": fault.error}
        if fault.drop is not None:
            await self._record(method, params, 0, body)
            if fault.drop == "hang":
                await self._until_gone(request)
            _abort(request)
            raise asyncio.CancelledError  # nothing is answered on a connection that is gone
        headers: dict[str, str] = {}
        if fault.status == 429 and fault.retry_after is not None:
            headers["Retry-After"] = str(fault.retry_after)
        await self._record(method, params, fault.status, body)
        if fault.body is None:
            return web.json_response(body, status=fault.status, headers=headers)
        raw = fault.body.encode("utf-8") if isinstance(fault.body, str) else fault.body
        return web.Response(
            body=raw, status=fault.status, headers=headers, content_type=fault.content_type
        )

    async def _until_gone(self, request: web.Request) -> None:
        """Waits until the client closes the connection (or the emulator stops)."""
        while self._runner is not None and not self._stopping.is_set():
            transport = request.transport
            if transport is None or transport.is_closing():
                return
            await asyncio.sleep(0.05)  # polled: aiohttp tells a handler no disconnect

    def _issue_socket_url(self) -> str:
        ticket = uuid.uuid4().hex
        self._tickets.add(ticket)
        return f"ws://127.0.0.1:{self._port}/socket?ticket={ticket}&app_id={self.identity.app_id}"

    async def _handle_socket(self, request: web.Request) -> web.StreamResponse:
        ticket = request.query.get("ticket", "")
        if ticket not in self._tickets:
            return web.Response(status=401, text="invalid or used ticket")
        self._tickets.discard(ticket)
        ws = web.WebSocketResponse(timeout=2.0)
        await ws.prepare(request)
        sock = _Socket(ws)
        self._sockets.append(sock)
        self._socket_count += 1
        hello = {
            "type": "hello",
            "num_connections": len(self._sockets),
            "debug_info": {"host": "slack-emulator", "approximate_connection_time": 18060},
            "connection_info": {"app_id": self.identity.app_id},
        }
        await ws.send_json(hello)
        await self._changed()
        try:
            async for msg in ws:
                if msg.type == aiohttp.WSMsgType.TEXT:
                    await self._on_socket_text(msg.data)
        finally:
            self._sockets.remove(sock)
            await self._changed()
        return ws

    def _live_socket(self) -> _Socket | None:
        live = [s for s in self._sockets if not s.retired and not s.ws.closed]
        return live[-1] if live else None

    async def _on_socket_text(self, data: str) -> None:
        try:
            ack = json.loads(data)
        except ValueError:
            logger.warning("Slack emulator: non-JSON socket frame %r", data[:200])
            return
        self._acks.append(ack)
        waiter = self._ack_waiters.get(str(ack.get("envelope_id")))
        if waiter is not None and not waiter.done():
            waiter.set_result(ack)
        await self._changed()

    async def _handle_upload(self, request: web.Request) -> web.StreamResponse:
        """The upload URL of files.getUploadURLExternal: takes the file's bytes."""
        faults = self._faults.get("upload")
        if faults:  # fail_next("upload", ...): the upload URL fails the same ways
            return await self._fail(request, "upload", {}, faults.pop(0))
        file = self.store.files.get(request.match_info["file_id"])
        if file is None:
            return web.Response(status=404, text="unknown file")
        file["content"] = await request.read()
        await self._record("upload", {"file_id": file["id"]}, 200, {"ok": True})
        return web.Response(text=f"OK - {len(file['content'])}")

    async def _handle_response_url(self, request: web.Request) -> web.Response:
        context = self._response_urls.get(request.match_info["rid"])
        if context is None:
            return web.json_response({"ok": False, "error": "expired_url"}, status=404)
        data = await _read_params(request)
        self._respond(context, data)
        await self._record("response_url", data, 200, {"ok": True})
        return web.json_response({"ok": True})

    def _respond(self, context: JSON, data: JSON) -> None:
        """Applies a response (response_url POST or command ack) the way Slack shows it."""
        channel, target = context["channel"], context.get("message_ts")
        with contextlib.suppress(ApiError):
            if target and data.get("delete_original"):
                self.store.delete(channel, target)
                return
            if target and data.get("replace_original"):
                message = self.store.get(channel, target)
                message.update({k: data[k] for k in ("text", "blocks") if k in data})
                return
        if not (data.get("text") or data.get("blocks")):
            return
        message = self.api.bot_message(data)
        if data.get("response_type") == "in_channel":
            self.store.add(channel, message)
        else:
            entry = {**message, "ts": self.store.next_ts(), "channel": channel}
            self.store.ephemeral.append({**entry, "to": context["user"], "via": "response_url"})

    def _response_url(self, user: str, channel: str, message_ts: str | None = None) -> str:
        rid = uuid.uuid4().hex
        self._response_urls[rid] = {"user": user, "channel": channel, "message_ts": message_ts}
        return f"{self.base_url}/response_url/{rid}"
