"""From the thread to a pull request: a result with changes offers *Open pull request*; the
click pushes the branch and opens it on GitHub, its link lands in the thread; failed checks
offer *Fix checks*, whose developer's commits are pushed to the pull request; a refusal says
what to do and *Try again* finishes the job. Real Bolt app, real Claude Code CLI, real git
push to a bare repository, a loopback GitHub."""

from __future__ import annotations

import dataclasses
import hashlib
import hmac
import json
import re
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from bot.pull_request_views import FIX_CHECKS_ACTION, OPEN_PR_ACTION
from harness.project import Project
from harness.testing.fake_github import CheckRun
from harness.testing.scripted_model import ModelRequest, Turn
from tests.bot.conftest import WAIT, Rig, RigFactory
from tests.forge_support import FULL_NAME, Forge, forge, with_forge
from tests.support import latest_task

pytestmark = [pytest.mark.anyio, pytest.mark.slow]
__all__ = ["forge"]  # the fixture, used by name

_CWD = re.compile(r"Primary working directory: (\S+)")


@pytest.fixture
def project(project_dir: Path, forge: Forge) -> Project:
    return with_forge(project_dir, forge)


def developer(request: ModelRequest) -> Turn:
    """Writes a file named by the request's last word (the fixer writes fixed.txt)."""
    cwd = _CWD.search(request.system_text)
    assert cwd, "the CLI names the working directory"
    prompt = request.first_user_text
    name = "fixed.txt" if "checks of pull request" in prompt else "settings.html"
    if not request.all_tool_results:
        return Turn.call("Write", file_path=f"{cwd.group(1)}/{name}", content="done\n")
    return Turn.finish(f"wrote {name}", [f"{name}: new"])


def button_message(r: Rig, channel: str, thread: str, action_id: str) -> dict[str, Any] | None:
    """The latest bot message in the thread with a button ``action_id``."""
    for message in reversed(r.bot_messages(channel, thread)):
        for block in message.get("blocks") or []:
            if any(e.get("action_id") == action_id for e in block.get("elements") or []):
                return message
    return None


async def shown(r: Rig, channel: str, thread: str, needle: str) -> str:
    return await r.slack.wait_for(
        lambda: r.bot_text(channel, thread) if needle in r.bot_text(channel, thread) else None,
        WAIT,
    )


async def test_a_result_with_changes_opens_a_pull_request_and_fixes_its_failed_checks(
    rig: RigFactory, forge: Forge
) -> None:
    async with rig(developer) as r:
        asked = (await r.say("add a settings page", channel="D1")).event["ts"]
        assert await r.final_reaction("D1", asked) == "white_check_mark"
        result = button_message(r, "D1", asked, OPEN_PR_ACTION)
        assert result is not None, "the result offers a pull request"
        slug = (await latest_task(r.orchestrator)).slug

        await r.slack.block_action("U1", "D1", result["ts"], OPEN_PR_ACTION, slug)

        text = await shown(r, "D1", asked, "is open")
        [pull] = forge.github.pulls(FULL_NAME)
        kept = (await latest_task(r.orchestrator)).pull_request
        assert kept is not None and kept.url.endswith(f"/{FULL_NAME}/pull/1")
        assert f"<{kept.url}|#1>" in text and f"`harness/{slug}` into `main`" in text
        assert pull.head == f"harness/{slug}" and "settings.html: new" in (pull.body or "")
        assert "Slack thread" in (pull.body or "")  # the thread's permalink
        head = forge.remote_branch(f"harness/{slug}")
        assert head is not None

        forge.github.set_check_runs(FULL_NAME, head, [
            CheckRun("tests", "completed", "failure", log="E   AssertionError: fixed.txt"),
        ])  # fmt: skip
        await shown(r, "D1", asked, "Checks failed")
        failed = button_message(r, "D1", asked, FIX_CHECKS_ACTION)
        assert failed is not None and "`tests`" in failed["text"]

        await r.slack.block_action("U1", "D1", failed["ts"], FIX_CHECKS_ACTION, slug)

        await shown(r, "D1", asked, "Pushed")
        fixed = forge.remote_branch(f"harness/{slug}")
        assert fixed is not None and fixed != head
        fixer = r.runs()[-1].first_user_text
        assert "E   AssertionError: fixed.txt" in fixer  # the failing job's log
        assert "wrote fixed.txt" in r.bot_text("D1", asked)  # its result in the thread


async def test_a_refusal_says_what_to_do_and_try_again_opens_it(
    rig: RigFactory, forge: Forge
) -> None:
    async with rig(developer) as r:
        asked = (await r.say("add a settings page", channel="D1")).event["ts"]
        assert await r.final_reaction("D1", asked) == "white_check_mark"
        result = button_message(r, "D1", asked, OPEN_PR_ACTION)
        assert result is not None
        slug = (await latest_task(r.orchestrator)).slug

        # Someone else may not open it for U1's task.
        await r.slack.block_action("U2", "D1", result["ts"], OPEN_PR_ACTION, slug)
        [refusal] = await r.slack.wait_for(lambda: r.slack.ephemeral("U2"), WAIT)
        assert "may not open a pull request" in refusal["text"]

        forge.github.fail_next("POST", rf"/repos/{FULL_NAME}/pulls", 401)
        await r.slack.block_action("U1", "D1", result["ts"], OPEN_PR_ACTION, slug)
        text = await shown(r, "D1", asked, "What to do")
        assert "GitHub refused the credentials" in text and "GITHUB_TOKEN" in text
        retry = button_message(r, "D1", asked, OPEN_PR_ACTION)
        assert retry is not None and retry["ts"] != result["ts"]  # a Try again button

        await r.slack.block_action("U1", "D1", retry["ts"], OPEN_PR_ACTION, slug)
        await shown(r, "D1", asked, "is open")
        assert len(forge.github.pulls(FULL_NAME)) == 1


def delivery(event: str, body: dict[str, Any], secret: str) -> tuple[bytes, dict[str, str]]:
    data = json.dumps(body).encode()
    signature = "sha256=" + hmac.new(secret.encode(), data, hashlib.sha256).hexdigest()
    return data, {"X-GitHub-Event": event, "X-Hub-Signature-256": signature,
                  "Content-Type": "application/json"}  # fmt: skip


async def test_a_signed_webhook_shows_failed_checks_without_waiting_for_the_next_poll(
    rig: RigFactory, forge: Forge, project: Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GITHUB_WEBHOOK_SECRET", "hook-secret")
    slow = dataclasses.replace(project.config.github, check_poll_seconds=3600.0)
    async with rig(developer, github=slow) as r:
        asked = (await r.say("add a settings page", channel="D1")).event["ts"]
        assert await r.final_reaction("D1", asked) == "white_check_mark"
        slug = (await latest_task(r.orchestrator)).slug
        pull = await r.orchestrator.pull_requests.open_pull_request(slug, by="U1")
        assert pull.head_commit is not None
        forge.github.set_check_runs(FULL_NAME, pull.head_commit,
                                    [CheckRun("tests", "completed", "failure")])  # fmt: skip
        hook = r.server.url.replace("/slack/events", "/github/webhook")
        event = {"action": "completed", "repository": {"full_name": FULL_NAME},
                 "check_run": {"head_sha": pull.head_commit, "name": "tests"}}  # fmt: skip

        async with aiohttp.ClientSession() as session:
            forged, headers = delivery("check_run", event, "not-the-secret")
            async with session.post(hook, data=forged, headers=headers) as refused:
                assert refused.status == 401
            signed, headers = delivery("check_run", event, "hook-secret")
            async with session.post(hook, data=signed, headers=headers) as accepted:
                assert accepted.status == 202

        await shown(r, "D1", asked, "Checks failed")
