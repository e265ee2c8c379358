"""``harness mcp`` added to the real Claude Code CLI (``--mcp-config``, the stdio command), the
CLI driven by the scripted model: it starts a task posted in a Slack channel, and the team sees
the request there and the agent's result in its thread (the Slack emulator)."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

import pytest

from bot.testing.slack_emulator import SlackEmulator
from harness.runtime.orphans import bundled_cli
from harness.testing.scripted_model import ModelRequest, ScriptedModel, Turn
from tests.bot.conftest import BOT_TOKEN, WAIT

pytestmark = pytest.mark.anyio

START = "mcp__harness__start_task"
AWAIT = "mcp__harness__await_agent"
CHANNEL = "C0TEAM"


def script(request: ModelRequest) -> Turn:
    if START not in request.tool_names:  # the agent the task started: a developer
        return Turn.finish("built the settings page", changes=["settings.py"])
    done = request.all_tool_results
    if not done:  # the person's Claude Code: start the task in the team's channel
        return Turn.call(START, request="add a settings page", channel=CHANNEL)
    if len(done) == 1:
        return Turn.call(AWAIT, agentId=done[0].json()["agentId"])
    return Turn.say("The team finished: " + done[1].json()["result"]["summary"])


@pytest.mark.slow
async def test_claude_code_with_harness_mcp_posts_a_task_in_slack_and_its_result_in_the_thread(
    project_dir: Path, slack: SlackEmulator, tmp_path: Path
) -> None:
    cli = bundled_cli()
    assert cli is not None
    async with ScriptedModel(script) as model:
        server = {
            "command": sys.executable,
            "args": ["-m", "harness", "mcp", "--config", str(project_dir / "config.yaml")],
            "env": {**model.env(), "SLACK_BOT_TOKEN": BOT_TOKEN, "SLACK_API_URL": slack.api_url},
        }
        home = tmp_path / "home"
        home.mkdir()
        claude = await asyncio.create_subprocess_exec(
            cli, "-p", "start the settings page with the team",
            "--mcp-config", json.dumps({"mcpServers": {"harness": server}}),
            "--strict-mcp-config", "--allowedTools", f"{START},{AWAIT}",
            cwd=project_dir,
            env={**model.env(), "HOME": str(home), "CLAUDE_CONFIG_DIR": str(home / ".claude"),
                 "PATH": "/usr/bin:/bin", "MCP_TOOL_TIMEOUT": "60000"},
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
        out, err = await asyncio.wait_for(claude.communicate(), WAIT)
    assert claude.returncode == 0, err.decode()
    assert "The team finished: built the settings page" in out.decode()
    top = [m for m in slack.messages(CHANNEL) if m.get("thread_ts", m["ts"]) == m["ts"]]
    [posted] = top
    assert "asked (through MCP):\nadd a settings page" in posted["text"]
    replies = await slack.wait_for(lambda: slack.thread(CHANNEL, posted["ts"])[1:] or None)
    assert "built the settings page" in replies[0]["text"]
