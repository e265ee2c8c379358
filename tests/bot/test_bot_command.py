"""``harness bot`` as people run it: subprocesses with the shipped config.yaml and roles,
against our Slack emulator and the scripted model (``python -m bot.demo``'s runs are in
tests/bot/test_demo.py)."""

from __future__ import annotations

import asyncio
import json
import signal
import socket
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import cast

import pytest

from bot.server import BotServer, describe
from bot.testing.slack_emulator import SlackEmulator
from harness.project import load_project
from harness.testing import spawn
from harness.testing.processes import claude_children
from harness.testing.scripted_model import ModelRequest, Turn, demo_script
from tests.bot.conftest import (
    BOT_TOKEN,
    WAIT,
    bot_outside,
    bot_process,
    clean_env,
    message_text,
)

pytestmark = [pytest.mark.slow, pytest.mark.subprocess]


def script(request: ModelRequest) -> Turn:
    if "fix it slowly" in request.first_user_text:
        return Turn(text="working on it", stall_seconds=120)
    return demo_script(request)


def start_bot(project_dir: Path, **env: str) -> subprocess.CompletedProcess[str]:
    """``harness bot`` with the shipped config and ``env``, expected to stop at start-up."""
    return spawn.run(
        [sys.executable, "-m", "harness", "bot", "--config", str(project_dir / "config.yaml")],
        capture_output=True,
        text=True,
        timeout=60,
        env=clean_env(**env),
        check=False,
    )


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def final_reaction(slack: SlackEmulator, channel: str, ts: str) -> str | None:
    found = slack.reactions(channel, ts) & {"white_check_mark", "x"}
    return next(iter(found), None)


@pytest.mark.anyio
async def test_harness_bot_in_http_mode_plans_in_the_dm_thread_and_stops_cleanly(
    project_dir: Path,
) -> None:
    async with (
        bot_outside(script) as (model, slack, env),
        bot_process(project_dir / "config.yaml", slack, env) as bot,
    ):
        sent = await slack.user_message("U1", "D1", "plan: a settings page")
        ts = sent.event["ts"]
        assert sent.status == 200
        assert await slack.wait_for(lambda: final_reaction(slack, "D1", ts), 90) == (
            "white_check_mark"
        )
        shown = [message_text(m) for m in slack.thread("D1", ts) if m.get("bot_id")]
        assert "*developer* finished" in "\n".join(shown)
        # The analyst's reply streamed from the start, so its result closes the message
        # above the developer's.
        [analyst] = [text for text in shown if "*product-analyst* finished" in text]
        assert "drafted developer a" in analyst and "which reported: Done:" in analyst

        retry = await slack.deliver_event(sent.event, retry_of=sent)
        assert retry.status == 200

        # A slow request: to prove the retry started nothing, and to stop mid-run.
        slow = await slack.user_message("U1", "D1", "fix it slowly")
        await model.wait_for_request(lambda r: "fix it slowly" in r.first_user_text, timeout=WAIT)
        children = claude_children(bot.pid)
        assert children
        tasks_dir = project_dir / ".agents" / "tasks"
        tasks = [json.loads(p.read_text()) for p in tasks_dir.glob("*/task.json")]
        assert sorted(len(t["dispatches"]) for t in tasks) == [1, 2]  # one run per message

        bot.send_signal(signal.SIGTERM)
        _, errors = await asyncio.wait_for(bot.communicate(), WAIT)
        assert bot.returncode == 0, errors.decode()
        assert not [pid for pid in children if alive(pid)]
        slow_task = next(
            t
            for t in (json.loads(p.read_text()) for p in tasks_dir.glob("*/task.json"))
            if t["description"] == "fix it slowly"
        )
        assert [d["status"] for d in slow_task["dispatches"]] == ["interrupted"]
        stopped = [message_text(m) for m in slack.thread("D1", slow.event["ts"])]
        assert any("*developer* was interrupted" in text for text in stopped)
        assert final_reaction(slack, "D1", slow.event["ts"]) == "x"


def test_harness_bot_without_tokens_says_what_to_set(project_dir: Path) -> None:
    done = start_bot(project_dir)
    assert done.returncode == 2
    assert "SLACK_BOT_TOKEN is not set" in done.stderr
    assert "fix: export SLACK_BOT_TOKEN=xoxb-" in done.stderr


def test_harness_bot_with_a_refused_app_token_says_so(project_dir: Path) -> None:
    emulator = SlackEmulator(bot_token=BOT_TOKEN, app_token="xapp-right")
    with emulator.in_thread() as slack:
        done = start_bot(
            project_dir,
            SLACK_BOT_TOKEN=BOT_TOKEN,
            SLACK_APP_TOKEN="xapp-wrong",
            SLACK_API_URL=slack.api_url,
        )
    assert done.returncode == 2
    assert "Slack refused SLACK_APP_TOKEN: invalid_auth" in done.stderr
    assert "Traceback" not in done.stderr
    assert [c.method for c in slack.calls()] == ["auth.test", "apps.connections.open"]


def test_harness_bot_with_a_refused_bot_token_says_where_to_find_the_right_one(
    project_dir: Path,
) -> None:
    with SlackEmulator(bot_token=BOT_TOKEN).in_thread() as slack:
        done = start_bot(
            project_dir,
            SLACK_BOT_TOKEN="xoxb-revoked-secretpart",
            SLACK_SIGNING_SECRET="s",
            SLACK_API_URL=slack.api_url,
        )

    assert done.returncode == 2
    assert "Slack refused SLACK_BOT_TOKEN: invalid_auth" in done.stderr
    assert "fix: export SLACK_BOT_TOKEN=xoxb-" in done.stderr
    assert "OAuth & Permissions" in done.stderr
    assert "secretpart" not in done.stderr and "Traceback" not in done.stderr


def test_swapped_tokens_are_named_before_any_call_to_slack(project_dir: Path) -> None:
    emulator = SlackEmulator(bot_token=BOT_TOKEN, app_token="xapp-right")
    with emulator.in_thread() as slack:
        done = start_bot(
            project_dir,
            SLACK_BOT_TOKEN="xapp-1-secretpart",
            SLACK_APP_TOKEN="xoxb-secretpart",
            SLACK_API_URL=slack.api_url,
        )
        calls = slack.calls()

    assert done.returncode == 2
    assert "SLACK_BOT_TOKEN holds a token shaped like SLACK_APP_TOKEN" in done.stderr
    assert "export SLACK_BOT_TOKEN=xoxb-" in done.stderr
    assert "secretpart" not in done.stderr and "Traceback" not in done.stderr
    assert calls == []


def test_an_unreachable_slack_at_start_is_one_error_with_its_fix(project_dir: Path) -> None:
    with socket.socket() as closed:  # a loopback port nobody listens on
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    done = start_bot(
        project_dir,
        SLACK_BOT_TOKEN=BOT_TOKEN,
        SLACK_SIGNING_SECRET="s",
        SLACK_API_URL=f"http://127.0.0.1:{port}/api/",
    )

    assert done.returncode == 2
    assert f"cannot reach Slack at http://127.0.0.1:{port}/api/" in done.stderr
    assert "HTTPS_PROXY" in done.stderr and "Traceback" not in done.stderr


def test_the_start_line_names_the_mode_workspace_config_roles_and_runtime(
    project_dir: Path,
) -> None:
    project = load_project(project_dir / "config.yaml")
    server = cast(
        BotServer, SimpleNamespace(mode="socket", url="", workspace="Acme", health_port=None)
    )

    line = describe(server, project)

    assert line == (
        f"Socket Mode, connected to Slack workspace Acme; config {project_dir / 'config.yaml'}, "
        "roles developer, product-analyst, reviewer; agents run local"
    )
