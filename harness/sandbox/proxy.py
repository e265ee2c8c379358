"""The sandbox's only way out: an HTTP proxy on a Unix socket, holding the model key.

Agents run in a bubblewrap sandbox with no network of their own (``--unshare-net``). One Unix
socket is bound into it, and this proxy serves that socket from outside. Inside, a small bridge
turns a loopback port into the socket, and Claude Code is pointed at it both as its model API
(``ANTHROPIC_BASE_URL``) and as its proxy (``HTTPS_PROXY``/``HTTP_PROXY``). So:

- the model key never enters the sandbox: the CLI sends a placeholder, and a model request
  (origin-form, ``POST /v1/messages``) goes on to the upstream with the real credential instead;
- anything else is ``CONNECT host:port`` (https) or an absolute-form request (plain http), let
  through only to hosts on the allow list (``sandbox.network.allow``). Other hosts get a 403
  saying how to allow them, so whoever reads the agent's error sees the fix, not a timeout.

Each connection carries one request: it goes on with ``Connection: close`` and the connection
ends with the reply; clients open a new one for the next. Bodies are relayed as bytes, never
parsed or buffered, so streamed replies (server-sent events) arrive as they are sent.
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

logger = logging.getLogger(__name__)

HEAD_LIMIT = 64 * 1024
HEAD_TIMEOUT = 60.0  # a client that connects and says nothing is not held forever
CONNECT_TIMEOUT = 30.0  # an unanswered SYN would otherwise wait for the kernel's minutes
_CHUNK = 64 * 1024

_TOKEN = r"[!#$%&'*+.^_`|~0-9A-Za-z-]+"
# Strict on purpose: a stray CR or LF could hide from this parse a line the server would see.
_REQUEST_LINE = re.compile(rf"({_TOKEN}) ([!-~]+) HTTP/1\.\d")
_HEADER_LINE = re.compile(rf"({_TOKEN}):[ \t]*([^\r\n]*?)[ \t]*")
# Not passed on: hop-by-hop headers (the proxy sets Host and Connection itself), and to the
# model API the client's placeholder credentials.
_HOP_BY_HOP = frozenset({"host", "connection", "keep-alive", "proxy-connection"})
_MODEL_DROPPED = _HOP_BY_HOP | {"x-api-key", "authorization", "proxy-authorization"}


@dataclass(frozen=True)
class Upstream:
    """Where model requests go, and the headers that authenticate them there."""

    base_url: str
    # repr=False: the credential must not show wherever an Upstream is printed or logged.
    credentials: Mapping[str, str] = field(repr=False)


def host_allowed(host: str, port: int, allow: Sequence[str]) -> bool:
    """Whether ``host:port`` matches an entry of ``allow``: ``name`` (any port), ``*.name`` (any
    subdomain of name, not name itself), ``name:port`` (that port only); IPv6 literals in
    brackets (``[::1]:443``). Case and a trailing dot do not matter. A malformed entry is a
    ValueError."""
    name = _normal(host)
    for entry in allow:
        pattern, only_port = _parse_entry(entry)
        if only_port is not None and only_port != port:
            continue
        if pattern.startswith("*."):
            suffix = pattern[1:]
            if name.endswith(suffix) and len(name) > len(suffix):
                return True
        elif name == pattern:
            return True
    return False


def _normal(host: str) -> str:
    host = host.strip().lower()
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    return host.removesuffix(".")


def _split_authority(text: str) -> tuple[str, int | None]:
    """``host``, ``host:port``, ``[v6]`` or ``[v6]:port`` -> (host, port or None)."""
    if text.startswith("["):
        host, bracket, rest = text[1:].partition("]")
        if not bracket or (rest and not rest.startswith(":")):
            raise ValueError(f"not host[:port]: {text!r}")
        port = rest[1:] if rest else None
    elif text.count(":") == 1:
        host, _, port = text.partition(":")
    else:
        host, port = text, None  # a name, or a bare IPv6 literal (several colons, no port)
    if port is not None and not (port.isdigit() and 0 < int(port) < 65536):
        raise ValueError(f"not a port: {port!r}")
    return host, None if port is None else int(port)


def _parse_entry(entry: str) -> tuple[str, int | None]:
    host, port = _split_authority(entry.strip().lower())
    host = host.removesuffix(".")
    if not host or "*" in host.removeprefix("*.") or host == "*.":
        raise ValueError(f"not an allowed-host entry: {entry!r}")
    return host, port


def _shown(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


class _HttpError(Exception):
    """Answer the client with this status and a one-line text body, then close."""

    def __init__(self, status: HTTPStatus, text: str) -> None:
        super().__init__(text)
        self.status = status
        self.text = text

    def response(self) -> bytes:
        body = f"harness sandbox: {self.text}\n".encode()
        head = (
            f"HTTP/1.1 {self.status.value} {self.status.phrase}\r\n"
            "Content-Type: text/plain; charset=utf-8\r\n"
            f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
        )
        return head.encode() + body


def _parse_head(head: bytes) -> tuple[str, str, list[tuple[str, str]]]:
    first, *rest = head.decode("latin-1").lstrip("\r\n").split("\r\n")[:-2]
    if not (request := _REQUEST_LINE.fullmatch(first)):
        raise _HttpError(HTTPStatus.BAD_REQUEST, "malformed request line")
    headers = [_HEADER_LINE.fullmatch(line) for line in rest]
    if not all(headers):
        raise _HttpError(HTTPStatus.BAD_REQUEST, "malformed header line")
    return request[1], request[2], [(m[1], m[2]) for m in headers if m]


def _head(request_line: str, headers: Sequence[tuple[str, str]], extra: bytes = b"") -> bytes:
    lines = [request_line, *(f"{name}: {value}" for name, value in headers)]
    return ("\r\n".join(lines) + "\r\n").encode("latin-1") + extra + b"Connection: close\r\n\r\n"


async def _open(
    host: str, port: int, tls: ssl.SSLContext | None = None
) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    try:
        async with asyncio.timeout(CONNECT_TIMEOUT):
            return await asyncio.open_connection(
                host, port, ssl=tls, server_hostname=host if tls else None, limit=_CHUNK
            )
    except OSError as exc:  # refused, unresolved, timed out, TLS failed: all OSErrors
        reason = exc.strerror or str(exc) or "timed out"
        raise _HttpError(
            HTTPStatus.BAD_GATEWAY, f"could not reach {_shown(host, port)}: {reason}"
        ) from None


async def _pump(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, eof: bool) -> bool:
    """Copy until end of stream (then pass the half-close on if ``eof``); False if it failed."""
    try:
        while data := await reader.read(_CHUNK):  # whatever has arrived: nothing is held back
            writer.write(data)
            await writer.drain()
        if eof and writer.can_write_eof():
            writer.write_eof()
    except Exception:  # a side gone wrong ends only this connection
        logger.debug("sandbox proxy: relay ended", exc_info=True)
        return False
    return True


async def _splice(
    client: tuple[asyncio.StreamReader, asyncio.StreamWriter],
    remote: tuple[asyncio.StreamReader, asyncio.StreamWriter],
    tunnel: bool,
) -> None:
    """Relay both ways. A tunnel ends when both sides have finished; a request when its reply
    has (the client may keep its side open, waiting to reuse the connection)."""
    up = asyncio.create_task(_pump(client[0], remote[1], eof=tunnel))
    down = asyncio.create_task(_pump(remote[0], client[1], eof=tunnel))
    pending = {up, down}
    try:
        while pending:
            done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
            if not all(task.result() for task in done) or (down in done and not tunnel):
                break
    finally:
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)


class EgressProxy:
    """Serves the sandbox's socket: model requests to ``upstream`` with its credentials,
    CONNECT and plain http to the hosts in ``allow``; ``on_refused("host:port")`` for others."""

    def __init__(
        self,
        socket_path: Path,
        upstream: Upstream,
        allow: Sequence[str] = (),
        *,
        on_refused: Callable[[str], None] | None = None,
        ask: Callable[[str, int], Awaitable[bool]] | None = None,
    ) -> None:
        for entry in allow:
            _parse_entry(entry)  # a malformed entry fails here, not on some agent's request
        parts = urlsplit(upstream.base_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError("the model API's URL must be http(s)://host[:port][/path]")
        self._socket_path = socket_path
        self._allow = tuple(allow)
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
            self._server = await asyncio.start_unix_server(self._serve, sock=sock, limit=HEAD_LIMIT)
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
        try:
            try:
                if not self._closing:
                    await self._relay(reader, writer, writers)
            except _HttpError as answer:
                logger.debug("sandbox proxy: answered %d: %s", answer.status, answer.text)
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
            for each in writers:
                each.close()
            for each in writers:
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(each.wait_closed(), 5)

    async def _relay(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        writers: list[asyncio.StreamWriter],
    ) -> None:
        try:
            async with asyncio.timeout(HEAD_TIMEOUT):
                head = await reader.readuntil(b"\r\n\r\n")
        except asyncio.IncompleteReadError:
            return  # gone before a whole request head: nobody to answer
        except asyncio.LimitOverrunError:
            raise _HttpError(HTTPStatus.BAD_REQUEST, "request head longer than 64 KiB") from None
        except TimeoutError:
            logger.debug("sandbox proxy: no request within %ss", HEAD_TIMEOUT)
            return
        method, target, headers = _parse_head(head)
        logger.debug("sandbox proxy: %s %s", method, target.partition("?")[0])
        host, port, tls, request = "", None, None, b""
        if method == "CONNECT":
            with contextlib.suppress(ValueError):
                host, port = _split_authority(target)
            if port is None:
                raise _HttpError(HTTPStatus.BAD_REQUEST, "CONNECT needs host:port")
            host = await self._allowed(host, port)
        elif target.startswith("/"):
            # A model request: the client's key is a placeholder, replaced by the real one.
            host, port, tls = self._host, self._port, self._tls
            kept = [(n, v) for n, v in headers if n.lower() not in self._replaced]
            kept.append(("Host", self._authority))
            line = f"{method} {self._prefix}{target} HTTP/1.1"
            request = _head(line, kept, self._credentials)
        elif target[:7].lower() == "http://":
            # Plain http through HTTP_PROXY: on to the host in the URL, in origin form.
            with contextlib.suppress(ValueError):  # say, a port that is not a number
                url = urlsplit(target)
                host, port = url.hostname or "", url.port or 80
            if not host or port is None:
                raise _HttpError(HTTPStatus.BAD_REQUEST, "malformed URL")
            host = await self._allowed(host, port)
            kept = [(n, v) for n, v in headers if not n.lower().startswith("proxy-")]
            kept = [(n, v) for n, v in kept if n.lower() not in _HOP_BY_HOP]
            kept.append(("Host", url.netloc.rpartition("@")[2]))  # the URL's host wins (RFC 9112)
            path = (url.path or "/") + (f"?{url.query}" if url.query else "")
            request = _head(f"{method} {path} HTTP/1.1", kept)
        else:
            raise _HttpError(HTTPStatus.BAD_REQUEST, "only CONNECT, http:// and model requests")
        try:
            remote = await _open(host, port, tls)
        except _HttpError:
            if not target.startswith("/"):
                raise
            # The model API unreachable: the CLI sees what it would see without the proxy
            # (no connection, not an HTTP error), so its retries say what happened.
            logger.debug("sandbox proxy: the model API is unreachable")
            writer.transport.abort()
            return
        writers.append(remote[1])
        if method == "CONNECT":
            writer.write(b"HTTP/1.1 200 Connection Established\r\n\r\n")
        else:
            remote[1].write(request)
        await _splice((reader, writer), remote, tunnel=method == "CONNECT")

    async def _allowed(self, host: str, port: int) -> str:
        """The host to connect to, normalised; a 403 saying the fix if it is not allowed
        (and, with ``ask``, not approved)."""
        host = _normal(host)
        if host_allowed(host, port, self._allow) or await self._approved(host, port):
            return host
        shown = _shown(host, port)
        logger.debug("sandbox proxy: refused %s", shown)
        if self._on_refused is not None:
            try:
                self._on_refused(shown)
            except Exception:  # the caller's hook failing must not take the answer with it
                logger.warning("sandbox proxy: on_refused failed", exc_info=True)
        raise _HttpError(
            HTTPStatus.FORBIDDEN,
            f"{shown} is not an allowed host{' and was not approved' if self._ask else ''}; "
            "add it to sandbox.network.allow in config.yaml to let agents reach it",
        )
