"""``harness mcp`` at work: the harness opened, the MCP server built over it and served over
stdio or Streamable HTTP until the client leaves or a signal comes (``cli.py`` registers the
command)."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import sys
from collections.abc import Coroutine
from typing import Any

from mcp.server.stdio import stdio_server

from harness.cli import offline
from harness.cli.terminal import terminal_user
from harness.config.mcp_server_schema import resolve_tokens
from harness.errors import HarnessError
from harness.mcp_server.announce import load_announcer
from harness.mcp_server.server import bind, build_server, endpoint_url, http_app, serve_http
from harness.mcp_server.service import McpService
from harness.mcp_server.unready import unready_server
from harness.opening import open_harness
from harness.project import Project
from harness.stop_signals import StopSignals

# The exit code of a stdio server whose harness could not open, once its client leaves.
EXIT_NOT_READY = 2


async def serve(project: Project, args: argparse.Namespace) -> int:
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
        try:
            harness = await stack.enter_async_context(opening)
        except HarnessError as exc:
            if sock is not None:  # a service: its operator reads the error at start
                raise
            return await _serve_unready(exc)
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


async def _serve_unready(exc: HarnessError) -> int:
    """Over stdio, a harness that cannot open still answers its client: each tool call says
    why and the fix (a client shows only "connection closed" of a server that exits)."""
    print(f"harness mcp: {exc}", file=sys.stderr, flush=True)
    print("harness mcp: serving over stdio, every tool answering why it cannot run",
          file=sys.stderr, flush=True)  # fmt: skip
    server = unready_server(exc)
    async with stdio_server() as (read, write):
        await _until_signal(server.run(read, write, server.create_initialization_options()))
    return EXIT_NOT_READY


async def _until_signal(serving: Coroutine[Any, Any, None]) -> None:
    """Runs ``serving`` until it ends (the client closed stdio) or SIGINT / SIGTERM."""
    work = asyncio.ensure_future(serving)
    with StopSignals(then=work.cancel).caught(), contextlib.suppress(asyncio.CancelledError):
        await work
