"""``harness mcp``: serve the orchestrator to MCP clients, over stdio (the default: the
local user's rights, as on the terminal) or Streamable HTTP (``--transport http``: bearer
tokens from config.yaml's ``mcpServer``, each a Slack user's rights)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from harness.cli.parser import LOG_INFO
from harness.errors import HarnessError

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
    parser.set_defaults(handler=run, log_level=LOG_INFO)


def run(project: Project, args: argparse.Namespace) -> int:
    if args.transport == "stdio" and (args.host != "127.0.0.1" or args.port != 8765):
        raise HarnessError("--host and --port are for --transport http",
                           fix="add --transport http, or leave them out")  # fmt: skip
    # Imported here: every `harness` command registers `mcp`, only this one serves it.
    import asyncio

    from harness.mcp_server.serving import serve

    return asyncio.run(serve(project, args))
