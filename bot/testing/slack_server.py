"""The server part of the loopback Slack emulator: Slack's state, its HTTP routes (Web API,
response URLs, uploads, downloads) and the Socket Mode socket.

`bot.testing.slack_emulator.SlackEmulator` holds one, with the simulated users and the
observation helpers.
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
from typing import TypeVar

import aiohttp
from aiohttp import web

from bot.testing.slack_api import WebApi, user_record
from bot.testing.slack_faults import Fault, Faults
from bot.testing.slack_files import DOWNLOAD_ROUTE, SharedFiles
from bot.testing.slack_model import JSON, ApiCall, ApiError, Identity, MessageStore
from harness.waits import within

logger = logging.getLogger(__name__)
T = TypeVar("T")
_DECODED = ("blocks", "attachments", "metadata", "files", "chunks", "prompts", "view")


@dataclass
class _Socket:
    ws: web.WebSocketResponse
    number: int  # in the order the connections were accepted, from 1
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


class Changes:
    """Wakes whoever waits for the emulator's state to change: a recorded call, a delivery, a
    socket come or gone, a message stored."""

    def __init__(self) -> None:
        self._cond = asyncio.Condition()
        # How many changes so far: a poller asks for what came after the one it saw.
        self.version = 0

    def reset(self) -> None:
        # A condition belongs to the loop that first waits on it; a restart may run on another.
        self._cond = asyncio.Condition()

    async def notify(self) -> None:
        self.version += 1
        async with self._cond:
            self._cond.notify_all()

    async def wait_for(self, predicate: Callable[[], T | None], timeout: float) -> T:
        """`predicate()`'s first truthy answer, re-checked on every change; TimeoutError after
        `timeout` seconds."""
        async with self._cond, asyncio.timeout(timeout):
            while not (result := predicate()):
                await self._cond.wait()
            return result


class EmulatorServer:
    """Slack's state (`store`, `users`, `api`, `shared_files`, `faults`) and its HTTP and
    WebSocket routes on loopback; records every Web API call."""

    def __init__(
        self,
        identity: Identity,
        *,
        port: int = 0,
        ack_timeout: float = 3.0,
        connect_timeout: float = 10.0,
    ) -> None:
        self.identity = identity
        self.ack_timeout = ack_timeout
        self.connect_timeout = connect_timeout
        self.store = MessageStore()
        self.users: dict[str, JSON] = {
            identity.bot_user_id: user_record(
                identity.bot_user_id, identity.team_id, identity.bot_name, is_bot=True
            )
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
        self.faults = Faults()
        self.changes = Changes()
        self._port = port
        self._calls: list[ApiCall] = []
        self._acks: list[JSON] = []
        self._stopping = asyncio.Event()
        self._tickets: set[str] = set()
        self._sockets: list[_Socket] = []
        # Which live connection (in the order they connected) gets the next envelope, as
        # Slack hands each to one of an app's connections; None: the newest.
        self.socket_choice: int | None = None
        # True: each envelope to the next live connection in turn, as Slack spreads an app's
        # events over its connections (one connection per envelope).
        self.socket_spread = False
        self._spread_turn = 0
        self.envelopes_by_connection: dict[int, int] = {}  # connection number: envelopes sent
        self._socket_count = 0
        self._ack_waiters: dict[str, asyncio.Future[JSON]] = {}
        self._response_urls: dict[str, JSON] = {}
        self._listeners: list[Callable[[ApiCall], None]] = []
        self._runner: web.AppRunner | None = None
        # More routes on the same server (the browser page of `harness bot --emulator`).
        self.extra_routes: list[Callable[[web.Application], None]] = []

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

    async def start(self) -> None:
        self.changes.reset()
        self._stopping = asyncio.Event()
        app = web.Application()
        app.router.add_route("*", "/api/{method}", self._handle_api)
        app.router.add_get("/socket", self._handle_socket)
        app.router.add_post("/response_url/{rid}", self._handle_response_url)
        app.router.add_post("/upload/{file_id}", self._handle_upload)
        app.router.add_get(DOWNLOAD_ROUTE, self.shared_files.download)
        for add_routes in self.extra_routes:
            add_routes(app)
        self._runner = web.AppRunner(app, access_log=None, shutdown_timeout=1.0)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", self._port)
        await site.start()
        self._port = int(self._runner.addresses[0][1])
        logger.info("Slack emulator listening on %s", self.api_url)

    async def stop(self) -> None:
        self._stopping.set()
        for sock in list(self._sockets):
            await sock.ws.close(code=aiohttp.WSCloseCode.GOING_AWAY, message=b"server stopping")
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    # ------------------------------------------------------------------ recording

    def on_call(self, listener: Callable[[ApiCall], None]) -> None:
        """Calls `listener` with every recorded call (e.g. to print `transcript_line`s)."""
        self._listeners.append(listener)

    def calls(self, method: str | None = None) -> list[ApiCall]:
        return [c for c in list(self._calls) if method is None or c.method == method]

    def acks(self) -> list[JSON]:
        return list(self._acks)

    @property
    def socket_connections(self) -> int:
        """How many Socket Mode connections were accepted so far."""
        return self._socket_count

    async def _record(self, method: str, params: JSON, status: int, response: JSON) -> None:
        call = ApiCall(method, params, time.time(), status, response)
        self._calls.append(call)
        for listener in self._listeners:
            try:
                listener(call)
            except Exception:
                logger.exception("Slack emulator call listener failed")
        await self.changes.notify()

    # ------------------------------------------------------------------ Socket Mode

    async def send_envelope(self, env: JSON) -> JSON | None:
        """Sends an envelope to the live Socket Mode connection; its ack, or None unacked."""
        try:
            sock = await self.changes.wait_for(self._live_socket, self.connect_timeout)
        except TimeoutError:
            message = f"no Socket Mode connection to deliver to in {self.connect_timeout}s"
            raise TimeoutError(message) from None
        live = self._live_sockets()
        if self.socket_spread and sock in live:
            sock, self._spread_turn = live[self._spread_turn % len(live)], self._spread_turn + 1
        by = self.envelopes_by_connection
        by[sock.number] = by.get(sock.number, 0) + 1
        waiter: asyncio.Future[JSON] = asyncio.get_running_loop().create_future()
        self._ack_waiters[env["envelope_id"]] = waiter
        try:
            await sock.ws.send_json(env)
            return await within(waiter, self.ack_timeout)
        except (TimeoutError, ConnectionError) as exc:
            logger.warning("Slack emulator: envelope %s not acked: %r", env["envelope_id"], exc)
            return None
        finally:
            self._ack_waiters.pop(env["envelope_id"], None)

    async def disconnect_socket(self, reason: str = "refresh_requested") -> None:
        """Asks the connected Socket Mode clients to reconnect (`{"type": "disconnect"}`)."""
        for sock in [s for s in self._sockets if not s.retired]:
            sock.retired = True
            frame = {"type": "disconnect", "reason": reason, "debug_info": {"host": "emulator"}}
            with contextlib.suppress(ConnectionError):
                await sock.ws.send_json(frame)
        await self.changes.notify()

    # ------------------------------------------------------------------ HTTP routes

    async def _handle_api(self, request: web.Request) -> web.StreamResponse:
        method = request.match_info["method"]
        try:
            params = await _read_params(request)
        except ValueError:
            await self._record(method, {}, 200, {"ok": False, "error": "invalid_json"})
            return web.json_response({"ok": False, "error": "invalid_json"})
        await self.faults.wait_if_stalled(method, self.changes.notify)
        auth = request.headers.get("Authorization", "")
        token = auth[7:] if auth.startswith("Bearer ") else params.pop("token", None)
        params.pop("token", None)
        if (fault := self.faults.take(method)) is not None:
            return await self._fail(request, method, params, fault)
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
        self, request: web.Request, method: str, params: JSON, fault: Fault
    ) -> web.StreamResponse:
        body: JSON = {"ok": False, "error": fault.error}
        if fault.applied:
            token = request.headers.get("Authorization", "")[7:] or None
            try:
                body = self.api.handle(method, params, token)
            except ApiError as exc:
                body = {"ok": False, "error": exc.error}
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
        self._socket_count += 1
        sock = _Socket(ws, self._socket_count)
        self._sockets.append(sock)
        hello = {
            "type": "hello",
            "num_connections": len(self._sockets),
            "debug_info": {"host": "slack-emulator", "approximate_connection_time": 18060},
            "connection_info": {"app_id": self.identity.app_id},
        }
        await ws.send_json(hello)
        await self.changes.notify()
        try:
            async for msg in ws:
                if msg.type == aiohttp.WSMsgType.TEXT:
                    await self._on_socket_text(msg.data)
        finally:
            self._sockets.remove(sock)
            await self.changes.notify()
        return ws

    def _live_sockets(self) -> list[_Socket]:
        return [s for s in self._sockets if not s.retired and not s.ws.closed]

    def _live_socket(self) -> _Socket | None:
        live = self._live_sockets()
        if self.socket_choice is not None and live:  # Slack picks any of the app's connections
            return live[self.socket_choice % len(live)]
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
        await self.changes.notify()

    async def _handle_upload(self, request: web.Request) -> web.StreamResponse:
        """The upload URL of files.getUploadURLExternal: takes the file's bytes."""
        # faults.fail_next("upload", ...): the upload URL fails the same ways
        if (fault := self.faults.take("upload")) is not None:
            return await self._fail(request, "upload", {}, fault)
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
        self.respond(context, data)
        await self._record("response_url", data, 200, {"ok": True})
        return web.json_response({"ok": True})

    def respond(self, context: JSON, data: JSON) -> None:
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

    def response_url(self, user: str, channel: str, message_ts: str | None = None) -> str:
        rid = uuid.uuid4().hex
        self._response_urls[rid] = {"user": user, "channel": channel, "message_ts": message_ts}
        return f"{self.base_url}/response_url/{rid}"
