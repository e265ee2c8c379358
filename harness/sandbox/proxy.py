"""The sandbox's only way out: an HTTP proxy on a Unix socket, holding the model key.

Agents run in a bubblewrap sandbox with no network of their own (``--unshare-net``). One Unix
socket is bound into it, and this proxy serves that socket from outside. Inside, a small bridge
turns a loopback port into the socket, and Claude Code is pointed at it both as its model API
(``ANTHROPIC_BASE_URL``) and as its proxy (``HTTPS_PROXY``/``HTTP_PROXY``). So:

- the model key never enters the sandbox: the CLI sends a placeholder, and a model call
  (origin form) goes on to the upstream with the real credential instead, but only the calls
  the CLI makes (``POST /v1/messages``, token counting), naming a model the agent may use
  and no more output tokens than the CLI asks for (``model_calls.py``), while its budget
  lasts. Every reply's usage is counted and priced as it passes (``model_route.py``),
  whoever inside made the call;
- anything else is ``CONNECT host:port`` (https) or an absolute-form request (plain http), let
  through only to hosts on the allow list (``sandbox.network.allow``) or approved. Other hosts
  get a 403 saying how to allow them, so whoever reads the agent's error sees the fix, not a
  timeout; a name that is no host name is refused without asking.

Each connection carries one request: it goes on with ``Connection: close`` and the connection
ends with the reply; clients open a new one for the next. Replies are relayed as they arrive,
so streamed ones (server-sent events) arrive as they are sent. A sandbox gets so many
connections at once and so many a second (``ProxyLimits``): past that it is answered 429 at
once, so a flood from inside cannot use up the harness's file descriptors.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import re
import socket
import ssl
import stat
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from http import HTTPStatus
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from harness.clock import SYSTEM, Clock
from harness.sandbox.hosts import (
    host_allowed,
    normal,
    parse_entry,
    shown,
    split_authority,
    valid_host,
)
from harness.sandbox.limits import Gate, ProxyLimits
from harness.sandbox.model_calls import (
    ModelCall,
    ModelPolicy,
    RefusedCall,
    Usage,
    check_request,
    endpoint,
    price,
)
from harness.sandbox.model_route import read_body, relay_reply
from harness.sandbox.wire import HttpError, open_remote, parse_head, request_head, splice
from harness.waits import within

__all__ = ["EgressProxy", "ProxyLimits", "Upstream", "host_allowed"]

logger = logging.getLogger(__name__)

ACCEPT_BATCH = 32  # connections taken from the listening socket at a time
HEAD_LIMIT = 64 * 1024
_CHUNK = 64 * 1024

_TOKEN = r"[!#$%&'*+.^_`|~0-9A-Za-z-]+"
# Not passed on: hop-by-hop headers (the proxy sets Host and Connection itself), and to the
# model API the client's placeholder credentials and the body's framing (the proxy has read
# the body and sends it with its length); replies come uncompressed so usage can be read.
_HOP_BY_HOP = frozenset({"host", "connection", "keep-alive", "proxy-connection"})
_MODEL_DROPPED = _HOP_BY_HOP | {
    "x-api-key",
    "authorization",
    "proxy-authorization",
    "content-length",
    "transfer-encoding",
    "expect",
    "te",
    "accept-encoding",
}


@dataclass(frozen=True)
class Upstream:
    """Where model requests go, and the headers that authenticate them there."""

    base_url: str
    # repr=False: the credential must not show wherever an Upstream is printed or logged.
    credentials: Mapping[str, str] = field(repr=False)


def _discard_unread(writer: asyncio.StreamWriter) -> None:
    """Takes in what the client has sent and nobody will read: a Unix socket closed with
    unread data resets the connection, and the client could lose the answer with it."""
    sock = writer.get_extra_info("socket")
    if sock is None:
        return
    with contextlib.suppress(OSError), sock.dup() as twin:
        while twin.recv(_CHUNK, socket.MSG_DONTWAIT):
            pass


class EgressProxy:
    """Serves the sandbox's socket: model calls ``models`` allows to ``upstream`` with its
    credentials, each one's cost to ``on_usage(cost_usd, usage)``, none once ``budget_usd``
    is spent, none while ``held()`` says so (answered here, unsent: the harness's own priming
    turn); CONNECT and plain http to the hosts in ``allow``, or that ``ask`` approves;
    ``on_refused("host:port")`` for others."""

    def __init__(
        self,
        socket_path: Path,
        upstream: Upstream,
        allow: Sequence[str] = (),
        *,
        models: ModelPolicy,
        on_usage: Callable[[float, Usage], None] | None = None,
        budget_usd: float | None = None,
        limits: ProxyLimits | None = None,
        on_refused: Callable[[str], None] | None = None,
        ask: Callable[[str, int], Awaitable[bool]] | None = None,
        clock: Clock = SYSTEM,
        held: Callable[[], bool] | None = None,
    ) -> None:
        for entry in allow:
            parse_entry(entry)  # a malformed entry fails here, not on some agent's request
        parts = urlsplit(upstream.base_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError("the model API's URL must be http(s)://host[:port][/path]")
        self._socket_path = socket_path
        self._allow = tuple(allow)
        self._models = models
        self._on_usage = on_usage
        self._budget = budget_usd
        self._spent = 0.0
        self._held = held
        self._gate = Gate(limits or ProxyLimits(), str(socket_path), clock)
        self._on_refused = on_refused
        # A host not allowed is asked once per proxy (one agent run): its connections, often
        # several at once (a package install), share the one decision.
        self._ask = ask
        self._decisions: dict[tuple[str, int], asyncio.Future[bool]] = {}
        self._host = parts.hostname
        self._port = parts.port or (443 if parts.scheme == "https" else 80)
        self._authority = parts.netloc.rpartition("@")[2]
        self._prefix = parts.path.rstrip("/")
        self._https = parts.scheme == "https"
        self._tls: ssl.SSLContext | None = None
        lines = []
        for name, value in upstream.credentials.items():
            if not re.fullmatch(_TOKEN, name) or not (value.isprintable() and value.isascii()):
                # The name only: the value is a secret.
                raise ValueError(f"the model API credential {name!r} is not a valid header")
            lines.append(f"{name}: {value}\r\n")
        self._credentials = "".join(lines).encode("ascii")
        self._replaced = _MODEL_DROPPED | {name.lower() for name in upstream.credentials}
        self._server: asyncio.Server | None = None
        self._inode: int | None = None
        self._tasks: set[asyncio.Task[Any]] = set()
        self._closing = False

    @property
    def socket_path(self) -> Path:
        return self._socket_path

    @property
    def spent_usd(self) -> float:
        """The cost of the model calls counted so far."""
        return self._spent

    async def start(self) -> None:
        if self._server is not None:
            raise RuntimeError("the sandbox proxy is already started")
        path = self._socket_path
        with contextlib.suppress(FileNotFoundError):
            if stat.S_ISSOCK(path.lstat().st_mode):
                path.unlink()  # left by an earlier run that did not close
        if self._https and self._tls is None:  # reads the CA store from disk: not on the loop
            self._tls = await asyncio.to_thread(ssl.create_default_context)
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.bind(str(path))
            os.chmod(path, 0o600)  # before listen(): nothing can connect until the mode is set
            self._inode = path.stat().st_ino
            # The backlog is also how many connections the loop accepts at a time: kept small,
            # a flood is refused a few dozen at a time instead of holding hundreds of
            # descriptors between being accepted and being answered.
            self._server = await asyncio.start_unix_server(
                self._serve, sock=sock, limit=HEAD_LIMIT, backlog=ACCEPT_BATCH
            )
        except BaseException:
            sock.close()
            self._remove_socket()
            raise
        self._closing = False
        logger.debug("sandbox proxy: listening on %s", path)

    async def close(self) -> None:
        server, self._server = self._server, None
        if server is None:
            return
        self._closing = True
        server.close()
        while tasks := set(self._tasks):
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
        await server.wait_closed()
        self._remove_socket()

    async def __aenter__(self) -> EgressProxy:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    async def _approved(self, host: str, port: int) -> bool:
        if self._ask is None:
            return False
        decision = self._decisions.get((host, port))
        if decision is None:
            decision = asyncio.ensure_future(self._ask(host, port))
            self._decisions[host, port] = decision
        try:
            return await asyncio.shield(decision)
        except asyncio.CancelledError:
            raise
        except Exception:  # the asking failed: a refusal, said in the log
            logger.exception("sandbox proxy: asking about %s failed", host)
            return False

    def _remove_socket(self) -> None:
        with contextlib.suppress(OSError):  # only our own socket: another may have replaced it
            if self._socket_path.lstat().st_ino == self._inode:
                self._socket_path.unlink()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        if task is not None:  # close() cancels the connections still open
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        writers = [writer]
        admitted = not self._closing and self._gate.admit()
        try:
            try:
                if not admitted:
                    if not self._closing:
                        raise HttpError(
                            HTTPStatus.TOO_MANY_REQUESTS,
                            f"too many connections from this sandbox (at most "
                            f"{self._gate.limits.connections} at once, "
                            f"{self._gate.limits.rate:g} a second); try again shortly",
                            api_error="rate_limit_error",
                            headers=[("Retry-After", "1")],
                        )
                else:
                    await self._relay(reader, writer, writers)
            except HttpError as answer:
                logger.debug("sandbox proxy: answered %d: %s", answer.status, answer.text)
                _discard_unread(writer)
                writer.write(answer.response())
                await writer.drain()
        except asyncio.CancelledError:
            # close() cancels the connections still open: end quietly (3.11's start_server
            # would report a handler ended by cancellation to the loop as an error).
            if not self._closing:
                raise
        except OSError:  # a side went away
            logger.debug("sandbox proxy: connection lost", exc_info=True)
        except Exception as exc:  # anything else is a bug, but one of this connection only
            logger.warning("sandbox proxy: a connection failed: %s", type(exc).__name__)
            logger.debug("sandbox proxy: the failure", exc_info=True)
        finally:
            if admitted:
                self._gate.left()
            for each in writers:
                each.close()
            for each in writers:
                with contextlib.suppress(Exception):
                    await within(each.wait_closed(), 5)

    async def _relay(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        writers: list[asyncio.StreamWriter],
    ) -> None:
        try:
            async with asyncio.timeout(self._gate.limits.head_timeout):
                head = await reader.readuntil(b"\r\n\r\n")
        except asyncio.IncompleteReadError:
            return  # gone before a whole request head: nobody to answer
        except asyncio.LimitOverrunError:
            raise HttpError(HTTPStatus.BAD_REQUEST, "request head longer than 64 KiB") from None
        except TimeoutError:
            logger.debug("sandbox proxy: no request within %ss", self._gate.limits.head_timeout)
            return
        method, target, headers = parse_head(head)
        logger.debug("sandbox proxy: %s %s", method, target.partition("?")[0])
        if target.startswith("/"):
            await self._model_call(method, target, headers, (reader, writer), writers)
            return
        host, port, request = "", None, b""
        if method == "CONNECT":
            with contextlib.suppress(ValueError):
                host, port = split_authority(target)
            if port is None:
                raise HttpError(HTTPStatus.BAD_REQUEST, "CONNECT needs host:port")
            host = await self._allowed(host, port)
        elif target[:7].lower() == "http://":
            # Plain http through HTTP_PROXY: on to the host in the URL, in origin form.
            with contextlib.suppress(ValueError):  # say, a port that is not a number
                url = urlsplit(target)
                host, port = url.hostname or "", url.port or 80
            if not host or port is None:
                raise HttpError(HTTPStatus.BAD_REQUEST, "malformed URL")
            host = await self._allowed(host, port)
            kept = [(n, v) for n, v in headers if not n.lower().startswith("proxy-")]
            kept = [(n, v) for n, v in kept if n.lower() not in _HOP_BY_HOP]
            kept.append(("Host", url.netloc.rpartition("@")[2]))  # the URL's host wins (RFC 9112)
            path = (url.path or "/") + (f"?{url.query}" if url.query else "")
            request = request_head(f"{method} {path} HTTP/1.1", kept)
        else:
            raise HttpError(HTTPStatus.BAD_REQUEST, "only CONNECT, http:// and model requests")
        remote = await open_remote(host, port)
        writers.append(remote[1])
        if method == "CONNECT":
            writer.write(b"HTTP/1.1 200 Connection Established\r\n\r\n")
        else:
            remote[1].write(request)
        await splice((reader, writer), remote, tunnel=method == "CONNECT")

    async def _model_call(
        self,
        method: str,
        target: str,
        headers: Sequence[tuple[str, str]],
        client: tuple[asyncio.StreamReader, asyncio.StreamWriter],
        writers: list[asyncio.StreamWriter],
    ) -> None:
        """A request to the model API: checked, then sent on with the key, its reply relayed
        and its usage counted."""
        if self._held is not None and self._held():
            # Nothing is sent on or counted; a final 400 ends the CLI's turn without retries.
            logger.debug("sandbox proxy: a model call held back (%s)", method)
            raise HttpError(
                HTTPStatus.BAD_REQUEST,
                "model calls are held while the harness primes this CLI",
                api_error="invalid_request_error",
                final=True,
            )
        try:
            billed = endpoint(method, target)
            if billed and self._budget is not None and self._spent >= self._budget:
                raise RefusedCall(
                    402,
                    "billing_error",
                    f"this agent's budget (${self._budget:.2f}) is spent: "
                    f"${self._spent:.4f} of model calls counted; no more are made",
                )
            body = await read_body(*client, headers)
            call = check_request(body, self._models, billed=billed)
        except RefusedCall as refused:
            logger.warning(
                "sandbox proxy: refused a model call (%s %s): %s",
                method,
                target.partition("?")[0][:200],
                refused.message,
            )
            raise HttpError(
                HTTPStatus(refused.status),
                refused.message,
                api_error=refused.kind,
                final=refused.final,
            ) from None
        kept = [(n, v) for n, v in headers if n.lower() not in self._replaced]
        kept += [
            ("Host", self._authority),
            ("Content-Length", str(len(body))),
            ("Accept-Encoding", "identity"),  # a compressed reply's usage could not be read
        ]
        request = request_head(f"{method} {self._prefix}{target} HTTP/1.1", kept, self._credentials)
        try:
            remote = await open_remote(self._host, self._port, self._tls)
        except HttpError:
            # The model API unreachable: the CLI sees what it would see without the proxy
            # (no connection, not an HTTP error), so its retries say what happened.
            logger.debug("sandbox proxy: the model API is unreachable")
            client[1].transport.abort()
            return
        writers.append(remote[1])
        remote[1].write(request + body)
        await relay_reply(client, remote, call, len(body), self._counted)

    def _counted(self, call: ModelCall, usage: Usage) -> None:
        cost = price(call.model, usage)
        self._spent += cost
        logger.debug("sandbox proxy: %s used %s: $%.6f", call.model, usage, cost)
        if self._on_usage is not None:
            try:
                self._on_usage(cost, usage)
            except Exception:  # the caller's hook failing must not take the reply with it
                logger.warning("sandbox proxy: on_usage failed", exc_info=True)

    async def _allowed(self, host: str, port: int) -> str:
        """The host to connect to, normalised; a 400 if it is no host name; a 403 saying the
        fix if it is not allowed (and, with ``ask``, not approved)."""
        host = normal(host)
        if not valid_host(host):
            logger.info("sandbox proxy: refused %r: not a host name", host[:200])
            raise HttpError(
                HTTPStatus.BAD_REQUEST, f"{host[:200]!r} is not a host name or an IP address"
            )
        if host_allowed(host, port, self._allow) or await self._approved(host, port):
            return host
        where = shown(host, port)
        logger.debug("sandbox proxy: refused %s", where)
        if self._on_refused is not None:
            try:
                self._on_refused(where)
            except Exception:  # the caller's hook failing must not take the answer with it
                logger.warning("sandbox proxy: on_refused failed", exc_info=True)
        raise HttpError(
            HTTPStatus.FORBIDDEN,
            f"{where} is not an allowed host{' and was not approved' if self._ask else ''}; "
            "add it to sandbox.network.allow in config.yaml to let agents reach it",
        )
