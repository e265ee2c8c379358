"""An MCP client whose `harness mcp` cannot reach a model: the server still answers over
stdio, and every tool call is a tool error with a code, the reason and the fix (not a
connection closed at start, all a client shows of a server that exits). The real command,
started by the MCP SDK's client as Claude Code starts it."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters

from tests.harness.mcp_server.conftest import call

pytestmark = [pytest.mark.anyio, pytest.mark.subprocess]

OUTSIDE = ("ANTHROPIC_", "CLAUDE_CODE_", "HARNESS_")


async def test_a_harness_that_cannot_reach_a_model_answers_each_tool_call_with_the_fix(
    project_dir: Path, tmp_path: Path
) -> None:
    home = tmp_path / "home"  # no Claude Code login in it
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(OUTSIDE)}
    server = StdioServerParameters(
        command=sys.executable,
        args=["-m", "harness", "mcp", "--config", str(project_dir / "config.yaml")],
        env={**env, "HOME": str(home)},
        cwd=project_dir,
    )
    async with Client(server) as client:
        tools = {tool.name for tool in (await client.list_tools()).tools}
        answer = await call(client, "start_task", request="fix the login bug")

    assert {"start_task", "list_tasks", "await_agent"} <= tools
    error = answer["error"]
    assert error["code"] == "HARNESS_NOT_READY"
    assert error["message"].startswith(
        "the harness behind this MCP server could not start: no way to reach a model"
    )
    assert "export ANTHROPIC_API_KEY" in error["suggestion"]
    assert error["suggestion"].endswith("then restart the MCP server (your client's MCP "
                                        "settings, or reconnect)")  # fmt: skip
