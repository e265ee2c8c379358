"""`/harness connect github` and `/harness disconnect github` in Slack: the code to enter on
GitHub at once, then word of the link once the person approved (or why not); unlinking.
The bot runs against the Slack emulator, GitHub is the loopback fake."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from bot.testing.slack_emulator import SlackEmulator
from harness.project import Project
from harness.testing.fake_github import FakeGitHub
from harness.testing.held_runtime import HeldRuntime
from tests.bot.conftest import RigFactory
from tests.forge_support import Forge, forge, with_forge

pytestmark = pytest.mark.anyio
__all__ = ["forge"]  # the fixture, used by name

CLIENT_ID = "Iv1.harness-tests"  # what Forge.config() sets as github.clientId


@pytest.fixture
def project(project_dir: Path, forge: Forge) -> Project:
    forge.github.add_oauth_app(CLIENT_ID)
    return with_forge(project_dir, forge)


async def shown(slack: SlackEmulator, needle: str, user: str = "U1") -> dict[str, Any]:
    """The newest ephemeral message to ``user`` that says ``needle`` (waiting for it)."""
    found = await slack.wait_for(lambda: [e for e in slack.ephemeral(user) if needle in e["text"]])
    return found[-1]


def the_code(text: str) -> str:
    found = re.search(r"enter ([A-Z0-9]{4}-[A-Z0-9]{4}) within", text)
    assert found, text
    return found.group(1)


async def test_connect_shows_the_code_and_says_when_the_account_is_linked(
    rig: RigFactory, forge: Forge
) -> None:
    async with rig(runtime=HeldRuntime()) as r:
        slack = r.slack
        await slack.slash_command("/harness", "connect github", "U1", "C1")

        asked = await shown(slack, "to link your GitHub account")
        code = the_code(asked["text"])
        page = f"{forge.github.web_url}/login/device"
        assert f"Open {page} and enter {code} within 15 minutes" in asked["text"]
        assert await r.orchestrator.accounts.github_login("U1") is None  # not before they approve

        forge.github.approve_device(code, "alice")

        await shown(slack, "Linked: your pull requests are now opened as @alice")
        assert await r.orchestrator.accounts.github_login("U1") == "alice"
        assert not [e for e in slack.ephemeral() if e.get("to") != "U1"]  # only they saw it

        await slack.slash_command("/harness", "disconnect github", "U1", "C1")
        await shown(slack, "Unlinked: the bot opens your pull requests again")
        assert await r.orchestrator.accounts.github_login("U1") is None
        await slack.slash_command("/harness", "disconnect github", "U1", "C1")
        await shown(slack, "No GitHub account of yours is linked")


@pytest.mark.parametrize(
    ("end", "said"),
    [
        (FakeGitHub.deny_device, "denied on GitHub"),
        (FakeGitHub.expire_device, "expired before it was entered"),
    ],
)
async def test_a_denied_or_expired_code_says_so_and_how_to_try_again(
    rig: RigFactory, forge: Forge, end: Callable[[FakeGitHub, str], None], said: str
) -> None:
    async with rig(runtime=HeldRuntime()) as r:
        await r.slack.slash_command("/harness", "connect github", "U1", "C1")
        code = the_code((await shown(r.slack, "to link your GitHub account"))["text"])

        end(forge.github, code)

        ended = await shown(r.slack, "Not linked")
        assert said in ended["text"]
        assert "Try again with `/harness connect github`" in ended["text"]
        assert await r.orchestrator.accounts.github_login("U1") is None


async def test_connect_without_a_forge_says_the_usage_and_help_lists_both(
    rig: RigFactory,
) -> None:
    async with rig(runtime=HeldRuntime()) as r:
        wrong = await r.slack.slash_command("/harness", "connect gitlab", "U1", "C1")
        assert "Usage: `/harness connect github`" in wrong.response_payload["text"]
        helped = await r.slack.slash_command("/harness", "help", "U1", "C1")
        assert "`/harness connect github`" in helped.response_payload["text"]
        assert "`/harness disconnect github`" in helped.response_payload["text"]
