"""A scripted Anthropic Messages API on loopback, so the real Claude Code CLI runs offline.

Tests and ``make demo`` point the CLI at it (``ScriptedModel.env()``); a *script* decides every
assistant turn (text, tool calls, a final ``StructuredOutput`` call) and every request is
recorded so tests can assert what the agent was offered and told.

What the bundled CLI (2.1.330, claude-agent-sdk 0.2.187) sends, measured against this server:

- With ``CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1`` the only request is
  ``POST /v1/messages?beta=true`` with ``"stream": true``, one per model turn (no count_tokens,
  no title call). Without it the CLI also sends ``HEAD /api/hello`` and a *side request*: a
  session-title query with ``tools: []``, no ``metadata``/``thinking`` and
  ``output_config.format = {"type": "json_schema", ...}`` asking for ``{"title"}``.
- Headers: ``anthropic-version: 2023-06-01``, ``anthropic-beta: claude-code-...``,
  ``x-api-key``, ``x-app: cli``, ``X-Claude-Code-Session-Id``, ``X-Stainless-*``.
- Body: ``model`` (the CLI default ``claude-opus-5-5`` unless ``options.model``), ``system`` as a
  list of text blocks (billing header, identity line, then the preset prompt with the
  ``append`` text at its end), ``tools`` (``StructuredOutput`` when ``output_format`` is set; MCP
  tools as ``mcp__<server>__<tool>`` directly when ``ENABLE_TOOL_SEARCH=false``), ``metadata``,
  ``thinking``, ``max_tokens``, ``stream``. ``messages`` holds the user prompt (a string, or text
  blocks led by ``<system-reminder>`` blocks when the ``claude_code`` preset is used), a
  ``role: "system"`` message with the environment, then assistant turns and user messages of
  ``tool_result`` blocks (``content`` a string or text blocks, ``is_error: true`` on errors).
- Needed SSE: message_start, content_block_start/delta(text_delta | input_json_delta)/stop,
  message_delta (stop_reason, usage.output_tokens), message_stop. Message ids must be unique:
  the CLI merges consecutive assistant responses that share an id.
- A ``StructuredOutput`` tool call ends the run at once (no further request):
  ``ResultMessage.structured_output`` is its input. Schema violations come back as an error
  tool_result and the CLI asks again.
- ``total_cost_usd`` is computed from the streamed usage priced by the *request's* model
  (unknown names are priced like the default); the model in message_start only shows up as
  ``AssistantMessage.model``.
- A 500 is retried with growing backoff (8 tries in 70 s, still going) unless the reply has
  ``x-should-retry: false``; with it the run ends at once with ``is_error`` and our message.
- ``ClaudeSDKClient.interrupt()`` during a stalled stream returns in ~10 ms and the turn ends
  with ``error_during_execution``; the CLI drops the connection.
- Timing: a one-turn run through ``query()`` takes ~0.45-0.75 s, ~0.35 s of it CLI start.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import json
import logging
import re
import threading
import time
import uuid
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Self

from aiohttp import web

logger = logging.getLogger(__name__)

STRUCTURED_OUTPUT_TOOL = "StructuredOutput"
DEFAULT_MODEL = "claude-sonnet-4-5"
_REMINDER = "<system-reminder>"
_CHUNK = 200  # characters per streamed delta


# --------------------------------------------------------------------------- turns


@dataclass(frozen=True)
class ToolCall:
    """One ``tool_use`` block of an assistant turn."""

    name: str
    input: dict[str, Any]
    id: str | None = None  # None: a fresh unique ``toolu_...`` id


@dataclass(frozen=True)
class Turn:
    """One assistant response: optional text, then tool calls (several = parallel tool use)."""

    text: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    # After message_start, wait this long (or until the client goes away) before the rest.
    stall_seconds: float = 0.0

    @classmethod
    def say(cls, text: str) -> Turn:
        return cls(text=text)

    @classmethod
    def call(cls, name: str, /, **tool_input: Any) -> Turn:
        return cls(tool_calls=(ToolCall(name, dict(tool_input)),))

    @classmethod
    def finish(
        cls,
        summary: str,
        changes: Sequence[str] = (),
        issues: Sequence[str] = (),
        questions: Sequence[str] = (),
        *,
        text: str = "",
    ) -> Turn:
        """The final ``StructuredOutput`` call with the harness result shape."""
        result = {
            "summary": summary,
            "changes": list(changes),
            "issues": list(issues),
            "questions": list(questions),
        }
        return cls(text=text, tool_calls=(ToolCall(STRUCTURED_OUTPUT_TOOL, result),))

    @property
    def stop_reason(self) -> str:
        return "tool_use" if self.tool_calls else "end_turn"


# --------------------------------------------------------------------------- requests


@dataclass(frozen=True)
class ToolResultView:
    """A ``tool_result`` block, with the name and input of the ``tool_use`` it answers."""

    tool_use_id: str
    tool_name: str | None
    text: str
    is_error: bool
    tool_input: dict[str, Any] = field(default_factory=dict)

    def json(self) -> Any:
        """The text parsed as JSON, or None when it is not JSON."""
        try:
            return json.loads(self.text)
        except ValueError:
            return None


def _blocks(content: Any) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    if isinstance(content, list):
        return [block for block in content if isinstance(block, dict)]
    return []


def _text_of(content: Any, *, skip_reminders: bool = False) -> str:
    parts = []
    for block in _blocks(content):
        text = block.get("text")
        if block.get("type") != "text" or not isinstance(text, str):
            continue
        if skip_reminders and text.lstrip().startswith(_REMINDER):
            continue
        parts.append(text)
    return "\n".join(parts)


@dataclass(frozen=True)
class ModelRequest:
    """One recorded ``POST /v1/messages``."""

    body: dict[str, Any]
    headers: dict[str, str]
    received_at: float
    # Not the agent's conversation (e.g. the CLI's session-title query): answered canned.
    is_side_request: bool = False
    index: int = 0  # position in ScriptedModel.requests

    @property
    def model(self) -> str:
        return str(self.body.get("model", ""))

    @property
    def messages(self) -> list[dict[str, Any]]:
        messages = self.body.get("messages")
        return [m for m in messages if isinstance(m, dict)] if isinstance(messages, list) else []

    @property
    def system_text(self) -> str:
        """All system text: the ``system`` blocks, then any ``role: "system"`` messages."""
        parts = [_text_of(self.body.get("system"))]
        parts += [_text_of(m.get("content")) for m in self.messages if m.get("role") == "system"]
        return "\n".join(part for part in parts if part)

    @property
    def tools(self) -> list[dict[str, Any]]:
        tools = self.body.get("tools")
        return [t for t in tools if isinstance(t, dict)] if isinstance(tools, list) else []

    @property
    def tool_names(self) -> list[str]:
        return [str(t.get("name")) for t in self.tools]

    @property
    def is_structured(self) -> bool:
        return STRUCTURED_OUTPUT_TOOL in self.tool_names

    def _user_texts(self) -> list[str]:
        texts = [
            _text_of(m.get("content"), skip_reminders=True)
            for m in self.messages
            if m.get("role") == "user"
        ]
        return [text for text in texts if text]

    @property
    def first_user_text(self) -> str:
        """The first user prompt (without the CLI's ``<system-reminder>`` blocks)."""
        texts = self._user_texts()
        return texts[0] if texts else ""

    @property
    def last_user_text(self) -> str:
        """The latest user text (tool results are not user text)."""
        texts = self._user_texts()
        return texts[-1] if texts else ""

    def _tool_uses(self) -> dict[str, dict[str, Any]]:
        uses: dict[str, dict[str, Any]] = {}
        for message in self.messages:
            if message.get("role") != "assistant":
                continue
            for block in _blocks(message.get("content")):
                if block.get("type") == "tool_use" and isinstance(block.get("id"), str):
                    uses[block["id"]] = block
        return uses

    def _results_in(self, messages: Sequence[dict[str, Any]]) -> list[ToolResultView]:
        uses = self._tool_uses()
        views = []
        for message in messages:
            if message.get("role") != "user":
                continue
            for block in _blocks(message.get("content")):
                if block.get("type") != "tool_result":
                    continue
                use_id = str(block.get("tool_use_id", ""))
                use = uses.get(use_id, {})
                tool_input = use.get("input")
                views.append(
                    ToolResultView(
                        tool_use_id=use_id,
                        tool_name=use.get("name") if isinstance(use.get("name"), str) else None,
                        text=_text_of(block.get("content")),
                        is_error=bool(block.get("is_error")),
                        tool_input=tool_input if isinstance(tool_input, dict) else {},
                    )
                )
        return views

    @property
    def tool_results(self) -> list[ToolResultView]:
        """The results answering the previous turn (those in the last user message)."""
        users = [m for m in self.messages if m.get("role") == "user"]
        return self._results_in(users[-1:])

    @property
    def all_tool_results(self) -> list[ToolResultView]:
        return self._results_in(self.messages)

    def summary(self) -> str:
        """One line for logs and timeout messages."""
        kind = "side" if self.is_side_request else "main"
        last = self.tool_results
        tail = (
            f"results={[r.tool_name for r in last]}"
            if last
            else f"user={self.last_user_text!r:.60}"
        )
        return f"#{self.index} {kind} tools={self.tool_names} {tail}"


Script = Callable[[ModelRequest], Turn | Awaitable[Turn]]
Predicate = Callable[[ModelRequest], bool]


def is_side_request(body: Mapping[str, Any]) -> bool:
    """The CLI's own queries (session title, ...) ask for a JSON format through
    ``output_config.format`` and carry no ``metadata``; the agent's turns always do."""
    output_config = body.get("output_config")
    if isinstance(output_config, dict) and "format" in output_config:
        return True
    return "metadata" not in body


def _instance(schema: Any) -> Any:
    """A small value matching a JSON schema (enough for the CLI's side queries)."""
    if not isinstance(schema, dict):
        return "Scripted"
    if "enum" in schema and isinstance(schema["enum"], list) and schema["enum"]:
        return schema["enum"][0]
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = kind[0] if kind else "string"
    if kind == "object":
        properties = schema.get("properties") or {}
        required = schema.get("required") or list(properties)
        return {name: _instance(properties.get(name)) for name in required}
    if kind == "array":
        return []
    if kind in ("number", "integer"):
        return 0
    if kind == "boolean":
        return False
    if kind == "null":
        return None
    return "Scripted session"


def _side_turn(body: Mapping[str, Any]) -> Turn:
    output_config = body.get("output_config")
    fmt = output_config.get("format") if isinstance(output_config, dict) else None
    if isinstance(fmt, dict) and fmt.get("type") == "json_schema":
        return Turn.say(json.dumps(_instance(fmt.get("schema"))))
    return Turn.say("OK")


def _sse(event: str, data: Mapping[str, Any]) -> bytes:
    return f"event: {event}\ndata: {json.dumps(data)}\n\n".encode()


def _chunks(text: str) -> list[str]:
    return [text[i : i + _CHUNK] for i in range(0, len(text), _CHUNK)] or [""]


# --------------------------------------------------------------------------- server


@dataclass
class _Waiter:
    predicate: Predicate
    after: int
    loop: asyncio.AbstractEventLoop
    future: asyncio.Future[ModelRequest]


def _settle(future: asyncio.Future[ModelRequest], request: ModelRequest | BaseException) -> None:
    if future.done():
        return
    if isinstance(request, BaseException):
        future.set_exception(request)
    else:
        future.set_result(request)


def _notify(waiter: _Waiter, outcome: ModelRequest | BaseException) -> None:
    with contextlib.suppress(RuntimeError):  # the waiter's loop is closed: nobody waits
        waiter.loop.call_soon_threadsafe(_settle, waiter.future, outcome)


class ScriptedModel:
    """The Messages API on loopback, answering each agent turn with ``script(request)``."""

    def __init__(
        self,
        script: Script,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        model_name: str | None = None,
    ) -> None:
        """``model_name`` goes into message_start; None echoes the request's model."""
        self._script = script
        self._host = host
        self._port = port
        self._model_name = model_name
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._requests: list[ModelRequest] = []
        self._waiters: list[_Waiter] = []
        self._errors: list[str] = []
        self._runner: web.AppRunner | None = None
        self._stopping: asyncio.Event | None = None
        self._base_url: str | None = None

    # ---- lifecycle

    async def start(self) -> None:
        if self._runner is not None:
            raise RuntimeError("ScriptedModel already started")
        self._stopping = asyncio.Event()
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_route("*", "/{tail:.*}", self._handle)
        # handler_cancellation: a client that goes away cancels its (stalled) handler.
        runner = web.AppRunner(
            app, access_log=None, handler_cancellation=True, shutdown_timeout=2.0
        )
        await runner.setup()
        try:
            site = web.TCPSite(runner, self._host, self._port)
            await site.start()
        except BaseException:
            await runner.cleanup()
            raise
        self._runner = runner
        host, port = runner.addresses[0][:2]
        self._base_url = f"http://{host}:{port}"
        logger.debug("scripted model listening on %s", self._base_url)

    async def stop(self) -> None:
        runner, self._runner = self._runner, None
        if runner is None:
            return
        if self._stopping is not None:
            self._stopping.set()  # releases stalled turns
        await runner.cleanup()
        with self._lock:
            waiters, self._waiters = self._waiters, []
        for waiter in waiters:
            _notify(waiter, RuntimeError("ScriptedModel stopped"))
        logger.debug("scripted model on %s stopped", self._base_url)

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.stop()

    @classmethod
    @contextlib.contextmanager
    def in_thread(
        cls,
        script: Script,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        model_name: str | None = None,
        start_timeout: float = 10.0,
    ) -> Iterator[ScriptedModel]:
        """A started model serving from its own event loop in a daemon thread (for sync code)."""
        model = cls(script, host=host, port=port, model_name=model_name)
        ready = threading.Event()
        box: dict[str, Any] = {}

        async def serve() -> None:
            stop = asyncio.Event()
            box["loop"], box["stop"] = asyncio.get_running_loop(), stop
            try:
                await model.start()
            except BaseException as exc:
                box["error"] = exc
                ready.set()
                raise
            ready.set()
            try:
                await stop.wait()
            finally:
                await model.stop()

        def run() -> None:
            with contextlib.suppress(Exception):  # a start failure is re-raised by the caller
                asyncio.run(serve())

        thread = threading.Thread(target=run, name="scripted-model", daemon=True)
        thread.start()
        if not ready.wait(start_timeout):
            raise TimeoutError(f"scripted model did not start within {start_timeout} s")
        if "error" in box:
            thread.join(start_timeout)
            raise RuntimeError("scripted model failed to start") from box["error"]
        try:
            yield model
        finally:
            loop: asyncio.AbstractEventLoop = box["loop"]
            stop_event: asyncio.Event = box["stop"]
            with contextlib.suppress(RuntimeError):  # loop already closed
                loop.call_soon_threadsafe(stop_event.set)
            thread.join(start_timeout)
            if thread.is_alive():
                logger.warning("scripted model thread did not stop within %s s", start_timeout)

    # ---- public state

    @property
    def base_url(self) -> str:
        if self._base_url is None:
            raise RuntimeError("ScriptedModel is not started")
        return self._base_url

    @property
    def requests(self) -> list[ModelRequest]:
        """Every ``POST /v1/messages`` so far, in order (a snapshot; safe from any thread)."""
        with self._lock:
            return list(self._requests)

    @property
    def main_requests(self) -> list[ModelRequest]:
        """The recorded requests of agent conversations (side requests left out)."""
        return [r for r in self.requests if not r.is_side_request]

    @property
    def errors(self) -> list[str]:
        """Script failures answered with HTTP 500, in order."""
        with self._lock:
            return list(self._errors)

    def env(self) -> dict[str, str]:
        """Environment for the CLI child (``ClaudeAgentOptions.env``)."""
        return {
            "ANTHROPIC_BASE_URL": self.base_url,
            "ANTHROPIC_API_KEY": "test",
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
            "ENABLE_TOOL_SEARCH": "false",
        }

    # ---- waiting

    @staticmethod
    def _matches(predicate: Predicate | None, request: ModelRequest) -> bool:
        if predicate is None:
            return not request.is_side_request
        return predicate(request)

    def _timeout_error(self, timeout: float) -> TimeoutError:
        seen = "; ".join(r.summary() for r in self.requests) or "none"
        return TimeoutError(f"no matching model request within {timeout} s (recorded: {seen})")

    async def wait_for_request(
        self, predicate: Predicate | None = None, timeout: float = 10.0, *, after: int = 0
    ) -> ModelRequest:
        """The first recorded request (index >= ``after``) matching ``predicate`` (default: any
        main request), waiting up to ``timeout`` seconds for it. Works from any event loop."""
        loop = asyncio.get_running_loop()
        with self._lock:
            for request in self._requests[after:]:
                if self._matches(predicate, request):
                    return request
            future: asyncio.Future[ModelRequest] = loop.create_future()
            waiter = _Waiter(lambda r: self._matches(predicate, r), after, loop, future)
            self._waiters.append(waiter)
        try:
            return await asyncio.wait_for(waiter.future, timeout)
        except TimeoutError:
            raise self._timeout_error(timeout) from None
        finally:
            with self._lock:
                if waiter in self._waiters:
                    self._waiters.remove(waiter)

    def wait_for_request_sync(
        self, predicate: Predicate | None = None, timeout: float = 10.0, *, after: int = 0
    ) -> ModelRequest:
        """Blocking ``wait_for_request`` for threads (e.g. with ``in_thread``)."""
        found: list[ModelRequest] = []

        def ready() -> bool:
            for request in self._requests[after:]:
                if self._matches(predicate, request):
                    found.append(request)
                    return True
            return False

        with self._changed:
            if not self._changed.wait_for(ready, timeout):
                raise self._timeout_error(timeout)
        return found[0]

    def _record(self, body: dict[str, Any], headers: dict[str, str]) -> ModelRequest:
        with self._lock:
            request = ModelRequest(
                body=body,
                headers=headers,
                received_at=time.time(),
                is_side_request=is_side_request(body),
                index=len(self._requests),
            )
            self._requests.append(request)
            self._changed.notify_all()
            settled: list[tuple[_Waiter, ModelRequest | BaseException]] = []
            for waiter in list(self._waiters):
                if request.index < waiter.after:
                    continue
                try:
                    matched = waiter.predicate(request)
                except Exception as exc:
                    logger.exception("wait_for_request predicate failed")
                    settled.append((waiter, exc))
                    continue
                if matched:
                    settled.append((waiter, request))
            for waiter, outcome in settled:
                self._waiters.remove(waiter)
                _notify(waiter, outcome)
        logger.debug("model request %s", request.summary())
        return request

    # ---- HTTP

    async def _handle(self, http: web.Request) -> web.StreamResponse:
        if http.method in ("HEAD", "GET", "OPTIONS"):
            return web.Response(status=200)
        if http.method != "POST":
            return _error(405, "invalid_request_error", f"method {http.method} not allowed")
        raw = await http.read()
        try:
            body = json.loads(raw) if raw else {}
        except ValueError:
            return _error(400, "invalid_request_error", "request body is not JSON")
        if not isinstance(body, dict):
            return _error(400, "invalid_request_error", "request body is not a JSON object")
        if http.path == "/v1/messages/count_tokens":
            return web.json_response({"input_tokens": max(1, len(raw) // 4)})
        if http.path != "/v1/messages":
            logger.warning("scripted model: unexpected POST %s", http.path)
            return _error(404, "not_found_error", f"no route {http.path}")

        request = self._record(body, dict(http.headers))
        try:
            turn = await self._turn_for(request)
        except Exception as exc:
            message = f"scripted model script failed on request #{request.index}: {exc!r}"
            logger.exception("%s", message)
            with self._lock:
                self._errors.append(message)
            return _error(500, "api_error", message)

        input_tokens = max(1, len(raw) // 4)
        if body.get("stream"):
            return await self._stream(http, request, turn, input_tokens)
        return web.json_response(self._message(request, turn, input_tokens))

    async def _turn_for(self, request: ModelRequest) -> Turn:
        if request.is_side_request:
            return _side_turn(request.body)
        outcome = self._script(request)
        turn = await outcome if inspect.isawaitable(outcome) else outcome
        if not isinstance(turn, Turn):
            raise TypeError(f"script returned {type(turn).__name__}, not Turn")
        return turn

    def _model_for(self, request: ModelRequest) -> str:
        return self._model_name or request.model or DEFAULT_MODEL

    @staticmethod
    def _content(turn: Turn) -> list[dict[str, Any]]:
        blocks: list[dict[str, Any]] = []
        if turn.text:
            blocks.append({"type": "text", "text": turn.text})
        for call in turn.tool_calls:
            blocks.append(
                {
                    "type": "tool_use",
                    "id": call.id or f"toolu_{uuid.uuid4().hex[:24]}",
                    "name": call.name,
                    "input": call.input,
                }
            )
        return blocks

    @staticmethod
    def _output_tokens(blocks: Sequence[Mapping[str, Any]]) -> int:
        return max(1, len(json.dumps(list(blocks))) // 4)

    def _message(self, request: ModelRequest, turn: Turn, input_tokens: int) -> dict[str, Any]:
        blocks = self._content(turn)
        return {
            "id": f"msg_{uuid.uuid4().hex[:24]}",
            "type": "message",
            "role": "assistant",
            "model": self._model_for(request),
            "content": blocks,
            "stop_reason": turn.stop_reason,
            "stop_sequence": None,
            "usage": {"input_tokens": input_tokens, "output_tokens": self._output_tokens(blocks)},
        }

    async def _stall(self, seconds: float) -> bool:
        """Wait ``seconds``; False when the server is stopping first."""
        assert self._stopping is not None
        try:
            await asyncio.wait_for(self._stopping.wait(), seconds)
        except TimeoutError:
            return True
        return False

    async def _stream(
        self, http: web.Request, request: ModelRequest, turn: Turn, input_tokens: int
    ) -> web.StreamResponse:
        message = self._message(request, turn, input_tokens)
        response = web.StreamResponse(
            headers={
                "Content-Type": "text/event-stream; charset=utf-8",
                "Cache-Control": "no-cache",
                "request-id": f"req_scripted_{request.index}",
            }
        )
        try:
            await response.prepare(http)
            start = {**message, "content": [], "stop_reason": None}
            start["usage"] = {"input_tokens": input_tokens, "output_tokens": 1}
            await response.write(_sse("message_start", {"type": "message_start", "message": start}))
            if turn.stall_seconds > 0 and not await self._stall(turn.stall_seconds):
                logger.debug("request #%d: server stopping during a stall", request.index)
                return response
            for index, block in enumerate(message["content"]):
                await self._stream_block(response, index, block)
            delta = {"stop_reason": turn.stop_reason, "stop_sequence": None}
            await response.write(
                _sse(
                    "message_delta",
                    {"type": "message_delta", "delta": delta, "usage": message["usage"]},
                )
            )
            await response.write(_sse("message_stop", {"type": "message_stop"}))
            await response.write_eof()
        except ConnectionResetError:
            logger.debug("request #%d: client went away mid-stream", request.index)
        except asyncio.CancelledError:
            logger.debug("request #%d: client went away (handler cancelled)", request.index)
            raise
        return response

    @staticmethod
    async def _stream_block(
        response: web.StreamResponse, index: int, block: Mapping[str, Any]
    ) -> None:
        if block["type"] == "text":
            start: dict[str, Any] = {"type": "text", "text": ""}
            deltas = [{"type": "text_delta", "text": part} for part in _chunks(block["text"])]
        else:
            start = {**block, "input": {}}
            deltas = [
                {"type": "input_json_delta", "partial_json": part}
                for part in _chunks(json.dumps(block["input"]))
            ]
        await response.write(
            _sse(
                "content_block_start",
                {"type": "content_block_start", "index": index, "content_block": start},
            )
        )
        for delta in deltas:
            await response.write(
                _sse(
                    "content_block_delta",
                    {"type": "content_block_delta", "index": index, "delta": delta},
                )
            )
        await response.write(
            _sse("content_block_stop", {"type": "content_block_stop", "index": index})
        )


def _error(status: int, kind: str, message: str) -> web.Response:
    # x-should-retry: false, or the CLI retries a 500 with backoff for about a minute.
    return web.json_response(
        {"type": "error", "error": {"type": kind, "message": message}},
        status=status,
        headers={"x-should-retry": "false"},
    )


# --------------------------------------------------------------------------- demo policy

DRAFT_TOOL = "mcp__harness__draft_agent"
AWAIT_TOOL = "mcp__harness__await_agent"
_ASSIGNMENT = "## Your Assignment"
_HISTORY = "## Task History"
_ROLE_HINTS = (
    ("code reviewer", "reviewer"),
    ("software developer", "developer"),
    ("product analyst", "analyst"),
)


def _excerpt(text: str, limit: int = 60) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1].rstrip() + "…"


def _assignment(prompt: str) -> str:
    """The request itself: what follows ``## Your Assignment`` when a history precedes it."""
    head, sep, tail = prompt.partition(_ASSIGNMENT)
    return tail.strip() if sep else head.strip()


def _earlier_work(prompt: str) -> str | None:
    """The first ``Summary:`` line of the prompt's ``## Task History`` section."""
    _, sep, history = prompt.partition(_HISTORY)
    if not sep:
        return None
    history = history.partition(_ASSIGNMENT)[0]
    match = re.search(r"^Summary:\s*(.+)$", history, flags=re.MULTILINE)
    return _excerpt(match.group(1), 100) if match else None


def _role_ish(system_text: str) -> str:
    lowered = system_text.lower()
    for hint, role in _ROLE_HINTS:
        if hint in lowered:
            return role
    return "worker"


def _finish(
    request: ModelRequest,
    summary: str,
    changes: Sequence[str] = (),
    issues: Sequence[str] = (),
    questions: Sequence[str] = (),
) -> Turn:
    if request.is_structured:
        return Turn.finish(summary, changes, issues, questions)
    lines = [summary, *(f"- {item}" for item in (*changes, *issues, *questions))]
    return Turn.say("\n".join(lines))


def _strings(value: Any) -> list[str]:
    return [str(item) for item in value] if isinstance(value, list) else []


def _coordinator_turn(request: ModelRequest, excerpt: str) -> Turn:
    plan = f"Plan for {excerpt}"
    results = request.tool_results
    errors = [r for r in results if r.is_error]
    if errors:
        issues = [f"{r.tool_name or 'tool'} failed: {r.text}" for r in errors]
        return _finish(request, f"{plan}: stopped on a tool error", issues=issues)
    for result in results:
        data = result.json()
        if result.tool_name == AWAIT_TOOL and isinstance(data, dict):
            agent_id = str(result.tool_input.get("agentId", "?"))
            status = str(data.get("status", "unknown"))
            child_result = data.get("result")
            child: dict[str, Any] = child_result if isinstance(child_result, dict) else {}
            reported = str(child.get("summary") or f"no result (status {status})")
            changes = [f"Drafted developer {agent_id} for step 1", *_strings(child.get("changes"))]
            issues = _strings(child.get("issues"))
            if status != "completed":
                issues.append(f"developer {agent_id} ended with status {status}")
            return _finish(
                request,
                f"{plan}: drafted developer {agent_id}, which reported: {reported}",
                changes,
                issues,
                _strings(child.get("questions")),
            )
        if result.tool_name == DRAFT_TOOL:
            drafted = data.get("agentId") if isinstance(data, dict) else None
            if isinstance(drafted, str):
                return Turn(
                    text=f"Waiting for developer {drafted}.",
                    tool_calls=(ToolCall(AWAIT_TOOL, {"agentId": drafted}),),
                )
            return _finish(
                request,
                f"{plan}: drafting failed",
                issues=[f"draft_agent returned no agentId: {result.text}"],
            )
    text = f"{plan}:\n1. Implement it (developer).\n2. Report the outcome.\nDrafting step 1 now."
    prompt = f"Implement step 1 of the plan for: {excerpt}"
    return Turn(
        text=text, tool_calls=(ToolCall(DRAFT_TOOL, {"role": "developer", "prompt": prompt}),)
    )


def _worker_turn(request: ModelRequest, excerpt: str) -> Turn:
    summary = f"Done: {excerpt}"
    earlier = _earlier_work(request.first_user_text)
    if earlier:
        summary += f" (building on earlier work: {earlier})"
    role = _role_ish(request.system_text)
    issues = [r.text for r in request.tool_results if r.is_error]
    return _finish(
        request, summary, changes=[f"{role} change for: {_excerpt(excerpt, 40)}"], issues=issues
    )


def demo_script(request: ModelRequest) -> Turn:
    """A deterministic, stateless policy for ``make demo`` and smoke tests.

    A coordinator (offered ``draft_agent``) drafts a developer for step 1, awaits it and
    reports; any other agent finishes at once with a result quoting its request."""
    if request.is_side_request:
        return Turn.say("Scripted demo session")
    excerpt = _excerpt(_assignment(request.first_user_text)) or "the request"
    if DRAFT_TOOL in request.tool_names:
        return _coordinator_turn(request, excerpt)
    return _worker_turn(request, excerpt)
