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
  Each retry is announced at once as ``SystemMessage("api_retry", {"attempt": 1,
  "max_retries": 10, "retry_delay_ms": 547, "error_status": 529, "error": "overloaded"})``
  (a refused connection: ``error_status: None, "error": "unknown"``); ``CLAUDE_CODE_MAX_RETRIES``
  sets the limit (default 10, at most 15), after which the CLI says ``API Error: ...`` in an
  ``AssistantMessage`` with ``error`` set and ends ``success`` with ``is_error``.
  ``Turn.fail(529)`` answers with a retried error.
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
import threading
from collections.abc import Iterator
from typing import Any, Self

from aiohttp import web

from harness.testing.demo_script import AWAIT_TOOL, DRAFT_TOOL, demo_script
from harness.testing.model_stream import (
    ERROR_KINDS,
    assistant_message,
    error_response,
    stream_block,
)
from harness.testing.model_turns import (
    DEFAULT_MODEL,
    STRUCTURED_OUTPUT_TOOL,
    ModelRequest,
    Predicate,
    Script,
    ToolCall,
    ToolResultView,
    Turn,
    side_turn,
    sse,
)
from harness.testing.request_log import RequestLog
from harness.waits import wait_set

__all__ = [
    "AWAIT_TOOL",
    "DRAFT_TOOL",
    "STRUCTURED_OUTPUT_TOOL",
    "ModelRequest",
    "Script",
    "ScriptedModel",
    "ToolCall",
    "ToolResultView",
    "Turn",
    "demo_script",
]

logger = logging.getLogger(__name__)


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
        self._log = RequestLog()
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
        self._log.close(RuntimeError("ScriptedModel stopped"))
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
        return self._log.requests

    @property
    def main_requests(self) -> list[ModelRequest]:
        """The recorded requests of agent conversations (side requests left out)."""
        return [r for r in self.requests if not r.is_side_request]

    @property
    def errors(self) -> list[str]:
        """Script failures answered with HTTP 500, in order."""
        return self._log.errors

    def env(self) -> dict[str, str]:
        """Environment for the CLI child (``ClaudeAgentOptions.env``)."""
        return {
            "ANTHROPIC_BASE_URL": self.base_url,
            "ANTHROPIC_API_KEY": "test",
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
            "ENABLE_TOOL_SEARCH": "false",
        }

    # ---- waiting

    async def wait_for_request(
        self, predicate: Predicate | None = None, timeout: float = 10.0, *, after: int = 0
    ) -> ModelRequest:
        """The first recorded request (index >= ``after``) matching ``predicate`` (default: any
        main request), waiting up to ``timeout`` seconds for it. Works from any event loop."""
        return await self._log.wait_for(predicate, timeout, after=after)

    def wait_for_request_sync(
        self, predicate: Predicate | None = None, timeout: float = 10.0, *, after: int = 0
    ) -> ModelRequest:
        """Blocking ``wait_for_request`` for threads (e.g. with ``in_thread``)."""
        return self._log.wait_for_sync(predicate, timeout, after=after)

    # ---- HTTP

    async def _handle(self, http: web.Request) -> web.StreamResponse:
        if http.method in ("HEAD", "GET", "OPTIONS"):
            return web.Response(status=200)
        if http.method != "POST":
            return error_response(405, "invalid_request_error", f"method {http.method} not allowed")
        raw = await http.read()
        try:
            body = json.loads(raw) if raw else {}
        except ValueError:
            return error_response(400, "invalid_request_error", "request body is not JSON")
        if not isinstance(body, dict):
            return error_response(400, "invalid_request_error", "request body is not a JSON object")
        if http.path == "/v1/messages/count_tokens":
            return web.json_response({"input_tokens": max(1, len(raw) // 4)})
        if http.path != "/v1/messages":
            logger.warning("scripted model: unexpected POST %s", http.path)
            return error_response(404, "not_found_error", f"no route {http.path}")

        request = self._log.record(body, dict(http.headers))
        try:
            turn = await self._turn_for(request)
        except Exception as exc:
            message = f"scripted model script failed on request #{request.index}: {exc!r}"
            logger.exception("%s", message)
            self._log.add_error(message)
            return error_response(500, "api_error", message)

        if turn.error_status:
            kind = ERROR_KINDS.get(turn.error_status, "api_error")
            return error_response(turn.error_status, kind, "scripted failure", retry=True)
        input_tokens = max(1, len(raw) // 4)
        if body.get("stream"):
            return await self._stream(http, request, turn, input_tokens)
        return web.json_response(assistant_message(turn, self._model_for(request), input_tokens))

    async def _turn_for(self, request: ModelRequest) -> Turn:
        if request.is_side_request:
            return side_turn(request.body)
        outcome = self._script(request)
        turn = await outcome if inspect.isawaitable(outcome) else outcome
        if not isinstance(turn, Turn):
            raise TypeError(f"script returned {type(turn).__name__}, not Turn")
        return turn

    def _model_for(self, request: ModelRequest) -> str:
        return self._model_name or request.model or DEFAULT_MODEL

    async def _stall(self, seconds: float) -> bool:
        """Wait ``seconds``; False when the server is stopping first."""
        assert self._stopping is not None
        return not await wait_set(self._stopping, seconds)

    async def _stream(
        self, http: web.Request, request: ModelRequest, turn: Turn, input_tokens: int
    ) -> web.StreamResponse:
        message = assistant_message(turn, self._model_for(request), input_tokens)
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
            await response.write(sse("message_start", {"type": "message_start", "message": start}))
            if turn.stall_seconds > 0 and not await self._stall(turn.stall_seconds):
                logger.debug("request #%d: server stopping during a stall", request.index)
                return response
            for index, block in enumerate(message["content"]):
                await stream_block(response, index, block)
            delta = {"stop_reason": turn.stop_reason, "stop_sequence": None}
            await response.write(
                sse(
                    "message_delta",
                    {"type": "message_delta", "delta": delta, "usage": message["usage"]},
                )
            )
            await response.write(sse("message_stop", {"type": "message_stop"}))
            await response.write_eof()
        except ConnectionResetError:
            logger.debug("request #%d: client went away mid-stream", request.index)
        except asyncio.CancelledError:
            logger.debug("request #%d: client went away (handler cancelled)", request.index)
            raise
        return response
