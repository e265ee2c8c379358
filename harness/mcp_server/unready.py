"""``harness mcp`` over stdio when the harness cannot open (no way to reach a model, NATS not
answering, ...): it still answers its client, so the person in Claude Code, Claude Desktop
or Cursor sees why and what to do, rather than the server's connection closing (all an MCP
client says of a server that exits at start). The same tools are listed; each call is the
tool error ``HARNESS_NOT_READY`` with the reason and its fix, until the client goes."""

from __future__ import annotations

from typing import Any

import mcp.types as mt
from mcp.server import Server
from mcp.server.context import ServerRequestContext

from harness.errors import HarnessError, ToolError
from harness.mcp_server.server import SERVER_NAME, tool_lister, tool_result
from harness.version import installed_version

NOT_READY = "HARNESS_NOT_READY"


def not_ready_error(exc: HarnessError) -> ToolError:
    """What every tool call answers while the harness could not open."""
    return ToolError(
        NOT_READY,
        f"the harness behind this MCP server could not start: {exc.message}",
        f"{exc.fix}; then restart the MCP server (your client's MCP settings, or reconnect)"
        if exc.fix
        else "see the server's log; then restart the MCP server",
    )


def unready_server(exc: HarnessError) -> Server[Any]:
    """An MCP server whose every tool call says why the harness is not there."""
    error = not_ready_error(exc)
    on_list_tools = tool_lister()

    async def on_call_tool(
        ctx: ServerRequestContext[Any, Any], params: mt.CallToolRequestParams
    ) -> mt.CallToolResult:
        return tool_result(error.to_json(), True)

    return Server(
        SERVER_NAME,
        version=installed_version() or "0",
        instructions=f"Not ready: {error.message} Fix: {error.suggestion}",
        on_list_tools=on_list_tools,
        on_call_tool=on_call_tool,
    )
