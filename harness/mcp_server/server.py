"""The MCP server over the service: tools (JSON text results; errors are tool errors with
the harness's shape), resources (``harness://tasks/{slug}/context`` and ``.../diff``), and
the two transports: stdio (the local user) and Streamable HTTP at ``/mcp`` behind bearer
tokens (each a Slack user; none or a wrong one: 401)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import re
import socket
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping
from typing import Any

import mcp.types as mt
from mcp.server import Server
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.settings import AuthSettings
from mcp.server.context import ServerRequestContext
from mcp.shared.exceptions import MCPError
from pydantic import AnyHttpUrl
from starlette.applications import Starlette
from starlette.middleware import Middleware

from harness.errors import HarnessError, ToolError
from harness.mcp_server.access import Person
from harness.mcp_server.agent_tools import AGENT_TOOLS
from harness.mcp_server.auth import TokenTable
from harness.mcp_server.disconnects import ClientGone
from harness.mcp_server.service import McpService, McpTool, as_tool_error
from harness.mcp_server.task_tools import TASK_TOOLS, task_context, task_diff
from harness.stop_signals import StopSignals
from harness.tools.validation import input_schema
from harness.version import installed_version

logger = logging.getLogger(__name__)

SERVER_NAME = "harness"
ENDPOINT = "/mcp"
TOOLS: dict[str, McpTool] = {tool.name: tool for tool in (*AGENT_TOOLS, *TASK_TOOLS)}
_RESOURCE = re.compile(r"^harness://tasks/(?P<slug>[^/]+)/(?P<part>context|diff)$")
_TEMPLATES = (
    ("context", "The reconstructed history of a task: its request and every agent's result.",
     "text/markdown"),
    ("diff", "What a task changed in its repository (the latest agent's diff).", "text/x-diff"),
)  # fmt: skip
# Tasks listed as resources (newest first); the templates reach every other one.
_LISTED_TASKS = 20


def build_server(service: McpService, *, local_name: str) -> Server[Any]:
    """The MCP server; a call without a bearer user (stdio) is ``local_name``'s, the local
    user's."""

    def person(ctx: ServerRequestContext[Any, Any]) -> Person:
        request = ctx.request
        user = request.scope.get("user") if request is not None else None
        if isinstance(user, AuthenticatedUser):
            return Person(user.access_token.client_id, user.access_token.client_id)
        if request is not None:  # over HTTP without a user: the auth layer failed open
            raise MCPError(code=mt.INVALID_REQUEST, message="no bearer token")
        return Person(None, local_name)

    on_list_tools = tool_lister()

    async def on_call_tool(
        ctx: ServerRequestContext[Any, Any], params: mt.CallToolRequestParams
    ) -> mt.CallToolResult:
        tool = TOOLS.get(params.name)
        if tool is None:
            error = ToolError(
                "TOOL_NOT_FOUND",
                f"no harness tool {params.name!r}",
                f"the tools are: {', '.join(TOOLS)}",
            )
            return tool_result(error.to_json(), True)
        step = 0

        async def report(line: str) -> None:
            nonlocal step
            step += 1
            try:
                await ctx.session.report_progress(step, None, line)
            except Exception as exc:  # noqa: BLE001 - the client went away: the call ends with it
                logger.debug("progress not sent: %s", exc)

        payload, failed = await service.call(tool, params.arguments or {}, person(ctx), report)
        return tool_result(payload, failed)

    async def on_list_resource_templates(
        ctx: ServerRequestContext[Any, Any], params: mt.PaginatedRequestParams | None
    ) -> mt.ListResourceTemplatesResult:
        return mt.ListResourceTemplatesResult(
            resource_templates=[
                mt.ResourceTemplate(
                    name=f"task-{part}",
                    uri_template=f"harness://tasks/{{slug}}/{part}",
                    description=text,
                    mime_type=mime,
                )
                for part, text, mime in _TEMPLATES
            ]
        )

    async def on_list_resources(
        ctx: ServerRequestContext[Any, Any], params: mt.PaginatedRequestParams | None
    ) -> mt.ListResourcesResult:
        summaries = await service.orchestrator.tasks.task_summaries()
        shown = (await service.visible(person(ctx), summaries))[:_LISTED_TASKS]
        return mt.ListResourcesResult(
            resources=[
                mt.Resource(
                    name=f"{s.slug} {part}",
                    uri=f"harness://tasks/{s.slug}/{part}",
                    description=f"{s.description[:100]} ({part})",
                    mime_type=mime,
                )
                for s in shown
                for part, _, mime in _TEMPLATES
            ]
        )

    async def on_read_resource(
        ctx: ServerRequestContext[Any, Any], params: mt.ReadResourceRequestParams
    ) -> mt.ReadResourceResult:
        uri = str(params.uri)
        match = _RESOURCE.match(uri)
        if match is None:
            raise MCPError(
                code=mt.INVALID_PARAMS,
                message=f"no resource {uri}",
                data=ToolError(
                    "RESOURCE_NOT_FOUND",
                    f"no resource {uri}",
                    "read harness://tasks/{slug}/context or harness://tasks/{slug}/diff",
                ).to_json(),
            )
        slug, part = match["slug"], match["part"]
        try:
            await service.task_for(person(ctx), slug)
            if part == "context":
                text, mime = await task_context(service, slug), "text/markdown"
            else:
                text, mime = (await task_diff(service, slug))["diff"] or "", "text/x-diff"
        except HarnessError as exc:
            error = as_tool_error(exc)
            raise MCPError(
                code=mt.INVALID_PARAMS, message=error.message, data=error.to_json()
            ) from exc
        return mt.ReadResourceResult(
            contents=[mt.TextResourceContents(uri=uri, text=text, mime_type=mime)]
        )

    return Server(
        SERVER_NAME,
        version=installed_version() or "0",
        instructions="The harness's team of Claude agents: start_task starts one on a "
        "request (optionally posted in a Slack channel), await_agent follows it to its "
        "result, list_questions and answer_question handle the approvals it waits on.",
        on_list_tools=on_list_tools,
        on_call_tool=on_call_tool,
        on_list_resources=on_list_resources,
        on_list_resource_templates=on_list_resource_templates,
        on_read_resource=on_read_resource,
    )


def tool_lister() -> Callable[
    [ServerRequestContext[Any, Any], mt.PaginatedRequestParams | None],
    Awaitable[mt.ListToolsResult],
]:
    """The handler that lists the harness's tools (built once: the list never changes)."""
    offered = [
        mt.Tool(
            name=tool.name,
            description=tool.description,
            input_schema=input_schema(tool.input),
            annotations=mt.ToolAnnotations(read_only_hint=tool.read_only),
        )
        for tool in TOOLS.values()
    ]

    async def on_list_tools(
        ctx: ServerRequestContext[Any, Any], params: mt.PaginatedRequestParams | None
    ) -> mt.ListToolsResult:
        return mt.ListToolsResult(tools=offered)

    return on_list_tools


def tool_result(payload: Mapping[str, Any], failed: bool) -> mt.CallToolResult:
    text = json.dumps(payload, ensure_ascii=False)
    return mt.CallToolResult(content=[mt.TextContent(type="text", text=text)], is_error=failed)


def http_app(server: Server[Any], tokens: Mapping[str, str], *, host: str, port: int) -> Starlette:
    """The Streamable HTTP app at ``/mcp``: every request needs ``Authorization: Bearer
    <token>`` with a configured token (else 401); the caller has that token's user's rights."""
    # The SDK's bearer layer needs an issuer; nothing is issued here (tokens come from config).
    auth = AuthSettings(
        issuer_url=AnyHttpUrl(f"http://{_url_host(host)}:{port}"), resource_server_url=None
    )
    app = server.streamable_http_app(
        streamable_http_path=ENDPOINT,
        host=host,
        auth=auth,
        token_verifier=TokenTable(tokens),
    )
    # Innermost, past the bearer check: a client gone mid-request is a line, not a traceback.
    app.user_middleware.append(Middleware(ClientGone))
    return app


def _url_host(host: str) -> str:
    return f"[{host}]" if ":" in host else host


def bind(host: str, port: int) -> socket.socket:
    """A listening socket (``port`` 0: a free one), bound before the server starts, so the
    address printed is the one served."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # IPPROTO_TCP spelled out: asyncio sets TCP_NODELAY only on sockets that say so, and
    # without it every answer waits ~40 ms for a delayed ACK.
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError:
        sock.close()
        raise
    sock.listen(128)
    sock.setblocking(False)
    return sock


def endpoint_url(sock: socket.socket, host: str) -> str:
    port = sock.getsockname()[1]
    return f"http://{_url_host(host)}:{port}{ENDPOINT}"


def _uvicorn(app: Starlette) -> Any:
    import uvicorn

    class _Server(uvicorn.Server):
        @contextlib.contextmanager
        def capture_signals(self) -> Iterator[None]:
            # Ours, not uvicorn's: it would raise the signal again once it stops, killing
            # the process before its agents are stopped and their records kept.
            yield

    return _Server(uvicorn.Config(app, log_level="warning", lifespan="on", access_log=False))


async def serve_http(app: Starlette, sock: socket.socket) -> None:
    """Serves ``app`` on ``sock`` until SIGINT or SIGTERM."""
    server = _uvicorn(app)

    def stop() -> None:
        server.should_exit = True

    with StopSignals(then=stop).caught(), contextlib.closing(sock):
        await server.serve(sockets=[sock])


@contextlib.asynccontextmanager
async def serving_http(app: Starlette, sock: socket.socket) -> AsyncIterator[None]:
    """Serves ``app`` on ``sock`` in the background for the block (tests, benchmarks): the
    socket already listens, so clients may connect at once."""
    server = _uvicorn(app)
    serving = asyncio.ensure_future(server.serve(sockets=[sock]))
    try:
        yield
    finally:
        server.should_exit = True
        await serving
        sock.close()
