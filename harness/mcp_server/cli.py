"""``harness mcp``: serve the orchestrator to MCP clients, over stdio (the default: the
local user's rights, as on the terminal) or Streamable HTTP (``--transport http``: bearer
tokens from config.yaml's ``mcpServer``, each a Slack user's rights)."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import signal
import sys
from collections.abc import Coroutine
from typing import TYPE_CHECKING, Any

from harness.errors import HarnessError

logger = logging.getLogger(__name__)

if TYPE_CHECKING:  # every `harness` command registers `mcp`: config.yaml's schema waits
    from harness.project import Project


def register(
    subparsers: argparse._SubParsersAction[argparse.ArgumentParser],
    common: argparse.ArgumentParser,
) -> None:
    parser = subparsers.add_parser(
        "mcp",
        parents=[common],
        help="serve the team's agents to MCP clients (Claude Code, Claude Desktop, Cursor)",
        description="Serve the orchestrator as an MCP server: start tasks (optionally posted "
        "in a Slack channel, with SLACK_BOT_TOKEN set), await, kill and list agents, read "
        "tasks' context and diffs, answer approvals and questions. Over stdio (the default) "
        "the caller has the local user's rights; over --transport http (endpoint /mcp) every "
        "request needs a bearer token from config.yaml's mcpServer.tokens, and has its Slack "
        "user's rights. Works beside a running bot on the same tasks. SIGTERM or Ctrl-C (or "
        "the client closing stdio) stops the agents it started: they end interrupted.",
    )
    parser.add_argument(
        "--transport", choices=("stdio", "http"), default="stdio", help="default: stdio"
    )
    parser.add_argument(
        "--host", default="127.0.0.1", help="http: the address to listen on (default 127.0.0.1)"
    )
    parser.add_argument(
        "--port", type=int, default=8765, help="http: the port (default 8765; 0: a free one)"
    )
    parser.add_argument(
        "--scripted",
        action="store_true",
        help="run the agents against the scripted demo model, offline (as `harness run "
        "--scripted`)",
    )
    parser.set_defaults(handler=run, log_level=logging.INFO)


def run(project: Project, args: argparse.Namespace) -> int:
    if args.transport == "stdio" and (args.host != "127.0.0.1" or args.port != 8765):
        raise HarnessError("--host and --port are for --transport http",
                           fix="add --transport http, or leave them out")  # fmt: skip
    return asyncio.run(serve(project, args))


async def serve(project: Project, args: argparse.Namespace) -> int:
    # Imported here: every `harness` command registers `mcp`, only this one serves it.
    from mcp.server.stdio import stdio_server

    from harness.cli import offline
    from harness.cli.terminal import terminal_user
    from harness.config.mcp_server_schema import resolve_tokens
    from harness.mcp_server.announce import load_announcer
    from harness.mcp_server.server import bind, build_server, endpoint_url, http_app, serve_http
    from harness.mcp_server.service import McpService
    from harness.opening import open_harness

    config = project.config
    tokens: dict[str, str] = {}
    sock = None
    if args.transport == "http":  # before anything is made: a missing token is said at once
        tokens = resolve_tokens(config.mcp_server, os.environ, file=config.file)
        try:
            sock = bind(args.host, args.port)
        except OSError as exc:
            raise HarnessError(
                f"cannot listen on {args.host}:{args.port}: {exc.strerror or exc}",
                fix="pick another --port (0: any free one), or stop what listens there",
            ) from exc
    if args.scripted:
        print(f"harness mcp: {offline.SCRIPTED_NOTE}", file=sys.stderr)
    async with contextlib.AsyncExitStack() as stack:
        # Where its agents run is checked and connected now: what is missing is said at once.
        opening = open_harness(project, purpose="run", scripted=args.scripted)
        harness = await stack.enter_async_context(opening)
        service = McpService(harness.orchestrator, load_announcer(os.environ))
        stack.push_async_callback(service.close)
        await service.start()
        server = build_server(service, local_name=terminal_user())
        if sock is None:
            print("harness mcp: serving over stdio", file=sys.stderr, flush=True)
            async with stdio_server() as (read, write):
                await _until_signal(server.run(read, write, server.create_initialization_options()))
        else:
            app = http_app(server, tokens, host=args.host, port=sock.getsockname()[1])
            print(f"harness mcp: serving {endpoint_url(sock, args.host)} "
                  f"({len(tokens)} token(s))", file=sys.stderr, flush=True)  # fmt: skip
            await serve_http(app, sock)
        print("harness mcp: stopping", file=sys.stderr, flush=True)
    return 0


async def _until_signal(serving: Coroutine[Any, Any, None]) -> None:
    """Runs ``serving`` until it ends (the client closed stdio) or SIGINT / SIGTERM."""
    loop = asyncio.get_running_loop()
    work = asyncio.ensure_future(serving)
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, work.cancel)
    try:
        with contextlib.suppress(asyncio.CancelledError):
            await work
    finally:
        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(signum)
