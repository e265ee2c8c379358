"""A button's work survives a SIGKILL of ``harness bot`` between GitHub's answer and the
thread: the click was kept before it was acked, and the next start takes it up again. An
open finds the pull request GitHub had already made (one pull request, not two), records it
in task.json and tells the thread once; a *Fix checks* cut short drafts its developer after
the restart, a *Run again* waiting its turn runs, and a GitHub link that was waited for is
said to need a new code. Real processes: the bot (``harness bot --mode http``), the real
CLI against the scripted model, real ``git push`` to a bare repository, a loopback GitHub
that holds its answer while the test kills the bot."""

from __future__ import annotations

import asyncio
import json
import re
import signal
from pathlib import Path
from typing import Any

import pytest

from bot.pull_request_views import FIX_CHECKS_ACTION, OPEN_PR_ACTION
from bot.testing.slack_emulator import SlackEmulator
from harness.testing.fake_github import CheckRun
from harness.testing.scripted_model import ModelRequest, Turn
from tests.bot.conftest import (
    WAIT,
    bot_outside,
    bot_process,
    message_text,
    session_of,
)
from tests.forge_support import FULL_NAME, Forge, forge, with_forge

pytestmark = [pytest.mark.anyio, pytest.mark.subprocess, pytest.mark.git]
__all__ = ["forge"]  # the fixture, used by name

_CWD = re.compile(r"Primary working directory: (\S+)")
FIXER = "checks of pull request"
JSON = dict[str, Any]


def developer(request: ModelRequest) -> Turn:
    """Writes settings.html (the fixer of failed checks: fixed.txt), then finishes."""
    cwd = _CWD.search(request.system_text)
    assert cwd, "the CLI names the working directory"
    name = "fixed.txt" if FIXER in request.first_user_text else "settings.html"
    if not request.all_tool_results:
        return Turn.call("Write", file_path=f"{cwd.group(1)}/{name}", content="done\n")
    return Turn.finish(f"wrote {name}", [f"{name}: new"])


def bot_texts(slack: SlackEmulator, ts: str) -> list[str]:
    return [message_text(m) for m in slack.thread("D1", ts) if m.get("bot_id")]


def said(slack: SlackEmulator, ts: str, needle: str) -> list[str]:
    return [text for text in bot_texts(slack, ts) if needle in text]


def button_message(slack: SlackEmulator, ts: str, action_id: str) -> JSON | None:
    """The latest bot message of the thread with a button ``action_id``."""
    for message in reversed([m for m in slack.thread("D1", ts) if m.get("bot_id")]):
        for block in message.get("blocks") or []:
            if any(e.get("action_id") == action_id for e in block.get("elements") or []):
                return message
    return None


def stored_task(project_dir: Path) -> JSON:
    [task_json] = (project_dir / ".agents" / "tasks").glob("*/task.json")
    data: JSON = json.loads(task_json.read_text("utf-8"))
    return data


async def result_with_changes(slack: SlackEmulator) -> tuple[str, JSON]:
    """U1 asks in a DM; the developer's result offers *Open pull request*: (thread, result)."""
    ts = str((await slack.user_message("U1", "D1", "add a settings page")).event["ts"])
    result = await slack.wait_for(lambda: button_message(slack, ts, OPEN_PR_ACTION), WAIT)
    return ts, result


async def stop(bot: asyncio.subprocess.Process) -> None:
    """SIGTERM: the bot delivers what it owes before it exits (what the thread shows is
    then all it will ever show); its log since it listened holds no traceback."""
    assert bot.stderr is not None
    bot.send_signal(signal.SIGTERM)
    log = (await asyncio.wait_for(bot.stderr.read(), WAIT)).decode("utf-8", "replace")
    await asyncio.wait_for(bot.wait(), WAIT)
    assert "Traceback" not in log and " ERROR " not in log, log


async def test_an_open_killed_after_github_made_the_pull_request_is_recorded_and_told_once(
    project_dir: Path, forge: Forge
) -> None:
    with_forge(project_dir, forge)
    config = project_dir / "config.yaml"
    async with bot_outside(developer) as (_, slack, env):
        async with bot_process(config, slack, env) as bot:
            ts, result = await result_with_changes(slack)
            slug = stored_task(project_dir)["slug"]
            made = forge.github.hold_next("POST", rf"/repos/{FULL_NAME}/pulls")
            clicked = await slack.block_action("U1", "D1", result["ts"], OPEN_PR_ACTION, slug)
            assert clicked.status == 200
            await asyncio.wait_for(made.reached.wait(), WAIT)
            # GitHub made the pull request; the bot dies before it hears so.
            bot.kill()
            await bot.wait()
            made.release()
        assert len(forge.github.pulls(FULL_NAME)) == 1
        assert stored_task(project_dir).get("pullRequest") is None
        assert not said(slack, ts, "is open")

        async with bot_process(config, slack, env) as bot:
            await slack.wait_for(lambda: said(slack, ts, "is open"), WAIT)
            await stop(bot)

    [pull] = forge.github.pulls(FULL_NAME)
    assert pull.head == f"harness/{slug}"
    kept = stored_task(project_dir)["pullRequest"]
    assert (kept["number"], kept["url"]) == (
        pull.number,
        f"{forge.github.web_url}/{FULL_NAME}/pull/1",
    )
    [told] = said(slack, ts, "is open")
    assert f"|#{pull.number}>" in told
    assert not said(slack, ts, "⚠️")


async def test_an_open_killed_between_task_json_and_the_thread_is_told_once_after_the_restart(
    project_dir: Path, forge: Forge
) -> None:
    with_forge(project_dir, forge)
    config = project_dir / "config.yaml"
    async with bot_outside(developer) as (_, slack, env):
        async with bot_process(config, slack, env) as bot:
            ts, result = await result_with_changes(slack)
            slug = stored_task(project_dir)["slug"]
            # GitHub answers and task.json takes the pull request; the post never arrives.
            slack.faults.drop_next("chat.postMessage", how="hang")
            await slack.block_action("U1", "D1", result["ts"], OPEN_PR_ACTION, slug)
            await slack.wait_for_call(
                "chat.postMessage", lambda call: "is open" in str(call.params.get("text")), WAIT
            )
            bot.kill()
            await bot.wait()
        assert stored_task(project_dir)["pullRequest"]["number"] == 1
        assert not said(slack, ts, "is open")

        async with bot_process(config, slack, env) as bot:
            await slack.wait_for(lambda: said(slack, ts, "is open"), WAIT)
            await stop(bot)

    assert len(forge.github.pulls(FULL_NAME)) == 1
    assert len(said(slack, ts, "is open")) == 1


async def test_a_fix_checks_click_killed_before_its_developer_started_runs_after_the_restart(
    project_dir: Path, forge: Forge
) -> None:
    with_forge(project_dir, forge)
    config = project_dir / "config.yaml"
    async with bot_outside(developer) as (model, slack, env):
        async with bot_process(config, slack, env) as bot:
            ts, result = await result_with_changes(slack)
            slug = stored_task(project_dir)["slug"]
            await slack.block_action("U1", "D1", result["ts"], OPEN_PR_ACTION, slug)
            await slack.wait_for(lambda: said(slack, ts, "is open"), WAIT)
            head = forge.remote_branch(f"harness/{slug}")
            assert head is not None
            forge.github.set_check_runs(FULL_NAME, head, [
                CheckRun("tests", "completed", "failure", log="E   AssertionError: fixed.txt"),
            ])  # fmt: skip
            failed = await slack.wait_for(
                lambda: button_message(slack, ts, FIX_CHECKS_ACTION), WAIT
            )
            # The fix reads the failing checks first: the bot dies while GitHub answers.
            reading = forge.github.hold_next(
                "GET", rf"/repos/{FULL_NAME}/commits/{head}/check-runs"
            )
            clicked = await slack.block_action("U1", "D1", failed["ts"], FIX_CHECKS_ACTION, slug)
            assert clicked.status == 200
            await asyncio.wait_for(reading.reached.wait(), WAIT)
            bot.kill()
            await bot.wait()
            reading.release()
        assert not said(slack, ts, "to fix the failed checks")

        async with bot_process(config, slack, env) as bot:
            await slack.wait_for(lambda: said(slack, ts, "Pushed"), WAIT * 2)
            await stop(bot)

    fixers = {session_of(r) for r in model.main_requests if FIXER in r.first_user_text}
    assert len(fixers) == 1  # one developer fixed the checks, drafted once
    [drafted] = said(slack, ts, "to fix the failed checks")
    assert "Drafted a developer" in drafted
    fixed = forge.remote_branch(f"harness/{slug}")
    assert fixed is not None and fixed != head
    assert len(forge.github.pulls(FULL_NAME)) == 1


class FirstOfEachStalls:
    """An agent's first session on a request stalls (the bot is killed meanwhile); a later
    session on the same request (run again) finishes."""

    def __init__(self) -> None:
        self.sessions: dict[str, list[str]] = {}  # the request's last line -> its sessions

    def __call__(self, request: ModelRequest) -> Turn:
        asked = request.first_user_text.strip().splitlines()[-1]
        sessions = self.sessions.setdefault(asked, [])
        if session_of(request) not in sessions:
            sessions.append(session_of(request))
        if session_of(request) == sessions[0]:
            return Turn(text="working on it", stall_seconds=120)
        return Turn.finish(f"Done: {asked}")


def interrupted_notice(slack: SlackEmulator, ts: str, agent_said: str) -> JSON | None:
    for message in slack.thread("D1", ts):
        text = message_text(message)
        if message.get("bot_id") and "was interrupted" in text and agent_said in text:
            return message
    return None


async def test_a_run_again_click_killed_before_its_agent_started_runs_after_the_restart(
    project_dir: Path,
) -> None:
    script = FirstOfEachStalls()
    config = project_dir / "config.yaml"
    async with bot_outside(script) as (model, slack, env):
        async with bot_process(config, slack, env) as bot:
            ts = str((await slack.user_message("U1", "D1", "fix it slowly")).event["ts"])
            await model.wait_for_request(timeout=WAIT)
            bot.kill()
            await bot.wait()

        async with bot_process(config, slack, env) as bot:
            notice = await slack.wait_for(lambda: interrupted_notice(slack, ts, ""), WAIT)
            # A follow-up works in the thread: the run again waits its turn behind it.
            seen = len(model.main_requests)
            await slack.user_message("U1", "D1", "and the docs", thread_ts=ts)
            await model.wait_for_request(timeout=WAIT, after=seen)
            [actions] = [b for b in notice["blocks"] if b["type"] == "actions"]
            button = actions["elements"][0]
            clicked = await slack.block_action(
                "U1", "D1", notice["ts"], button["action_id"], button["value"], thread_ts=ts
            )
            assert clicked.status == 200
            bot.kill()
            await bot.wait()

        async with bot_process(config, slack, env) as bot:
            await slack.wait_for(lambda: said(slack, ts, "Done: fix it slowly"), WAIT * 2)
            await slack.wait_for(lambda: len(said(slack, ts, "was interrupted")) >= 2 or None, WAIT)
            await stop(bot)

    assert len(script.sessions["fix it slowly"]) == 2  # the stalled run, and the one run again
    assert len(script.sessions["and the docs"]) == 1  # interrupted, said so, not re-run
    assert len(said(slack, ts, "Done: fix it slowly")) == 1


async def test_a_github_link_cut_short_by_a_kill_tells_the_person_to_connect_again(
    project_dir: Path, forge: Forge
) -> None:
    forge.github.add_oauth_app("Iv1.harness-tests")  # Forge.config()'s github.clientId
    with_forge(project_dir, forge)
    config = project_dir / "config.yaml"
    async with bot_outside(developer) as (_, slack, env):

        def told(needle: str) -> list[JSON]:
            return [e for e in slack.ephemeral("U1") if needle in e["text"]]

        async with bot_process(config, slack, env) as bot:
            await slack.slash_command("/harness", "connect github", "U1", "C1")
            await slack.wait_for(lambda: told("to link your GitHub account"), WAIT)
            bot.kill()
            await bot.wait()

        async with bot_process(config, slack, env) as bot:
            [again] = await slack.wait_for(lambda: told("I restarted"), WAIT)
            await stop(bot)

    assert "run `/harness connect github` again" in again["text"]
    assert again["channel"] == "C1"  # where they typed the command
    assert len(told("I restarted")) == 1
    assert not [e for e in slack.ephemeral() if e.get("to") != "U1"]
