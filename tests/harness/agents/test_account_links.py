"""Linking a person's GitHub account through the orchestrator: without a client id it says
what to configure; a newer link replaces one still waiting; unlinking stops a waiting one."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from harness.agents.account_links import AccountLinks
from harness.agents.orchestrator import Orchestrator
from harness.errors import ForgeError
from harness.forge.accounts import AccountStore
from harness.project import Project, build_orchestrator, load_project
from harness.runtime.claude import ClaudeRuntime
from tests.forge_support import Forge, forge

pytestmark = pytest.mark.anyio
__all__ = ["forge"]  # the fixture, used by name

WAIT = 10.0


@pytest.fixture
async def orchestrator(project_dir: Path, forge: Forge) -> AsyncIterator[Orchestrator]:
    config = project_dir / "config.yaml"
    config.write_text(config.read_text(encoding="utf-8") + forge.config(), encoding="utf-8")
    forge.github.add_oauth_app("Iv1.harness-tests")
    orchestrator = build_orchestrator(load_project(config), ClaudeRuntime())
    yield orchestrator
    await orchestrator.shutdown()


async def test_without_a_client_id_linking_says_what_to_configure(project: Project) -> None:
    orchestrator = build_orchestrator(project, ClaudeRuntime())
    try:
        assert orchestrator.config.github.client_id is None
        with pytest.raises(ForgeError) as unset:
            await orchestrator.accounts.start_github_link("U1")
    finally:
        await orchestrator.shutdown()

    assert "`github.clientId`" in unset.value.message and "`github.clientId`" in unset.value.fix


async def test_a_newer_link_replaces_the_one_still_waiting(
    orchestrator: Orchestrator, forge: Forge
) -> None:
    first = await orchestrator.accounts.start_github_link("U1")
    second = await orchestrator.accounts.start_github_link("U1")

    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(first.linked, WAIT)
    forge.github.approve_device(second.user_code, "alice")
    assert await asyncio.wait_for(second.linked, WAIT) == "alice"
    assert await orchestrator.accounts.github_login("U1") == "alice"


async def test_unlinking_stops_a_link_still_waiting(
    orchestrator: Orchestrator, forge: Forge
) -> None:
    waiting = await orchestrator.accounts.start_github_link("U1")

    assert await orchestrator.accounts.unlink_github("U1") is False  # nothing was linked yet
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(waiting.linked, WAIT)
    assert await orchestrator.accounts.github_login("U1") is None


async def test_an_account_is_linked_per_github(orchestrator: Orchestrator, forge: Forge) -> None:
    login = await orchestrator.accounts.start_github_link("U1")
    forge.github.approve_device(login.user_code, "alice")
    await asyncio.wait_for(login.linked, WAIT)

    config = orchestrator.config
    github = dataclasses.replace(config.github, api_url="https://ghe.example.com")
    on_enterprise = AccountLinks(
        dataclasses.replace(config, github=github), AccountStore(config.tasks_dir)
    )
    assert await on_enterprise.github_login("U1") is None
