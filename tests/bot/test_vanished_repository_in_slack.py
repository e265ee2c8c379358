"""A follow-up in a Slack thread whose repository was deleted, on the spare the thread's last
agent left: the thread says the repository is gone, where, and what to do, names no branch,
and the task's worktree keeps its work. Real Bolt app, real Claude Code CLI, real git."""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path

import pytest

from harness.project import Project, load_project
from harness.runtime.claude import ClaudeRuntime
from harness.runtime.host import AgentHost
from harness.testing.scripted_model import ScriptedModel
from harness.workspaces.manager import Workspaces
from tests.bot.conftest import WAIT, RigFactory
from tests.bot.test_workspaces_in_slack import developer
from tests.support import add_repositories, latest_task, make_repository

pytestmark = [pytest.mark.anyio, pytest.mark.slow, pytest.mark.git]


@pytest.fixture
def repository(tmp_path: Path) -> Path:
    return make_repository(
        tmp_path / "web", {"check.sh": "grep -q done page.txt && echo 'checks pass'\n"}
    )


@pytest.fixture
def project(project_dir: Path, repository: Path) -> Project:
    config = add_repositories(project_dir, {"web": repository}, default="web")
    loaded = load_project(config)
    return dataclasses.replace(
        loaded, config=dataclasses.replace(loaded.config, follow_up_spares=1)
    )


async def test_a_follow_up_on_a_deleted_repository_says_so_and_names_no_branch(
    rig: RigFactory, project: Project, repository: Path
) -> None:
    async with ScriptedModel(developer) as model:
        host = AgentHost(ClaudeRuntime(base_env=model.env()), Workspaces(project.config.workspaces))
        async with rig(runtime=host) as r:
            first = (await r.say("make the page blue", channel="D1")).event["ts"]
            assert await r.final_reaction("D1", first) == "white_check_mark"
            task = await latest_task(r.orchestrator)
            assert host.follow_ups is not None
            await host.follow_ups.wait_for(task.slug, WAIT)  # the next agent's spare is ready
            worktree = project.config.workspaces.root / task.slug
            shutil.rmtree(repository)
            shown_before = r.bot_text("D1", first)

            again = await r.say("now make it green", channel="D1", thread_ts=first)
            assert await r.final_reaction("D1", again.event["ts"]) == "x"
            said = r.bot_text("D1", first)[len(shown_before) :]

    assert "cannot find any more" in said and f"{repository} does not exist" in said
    assert "put the repository back" in said
    assert "*Branch*" not in said and "✅" not in said
    assert (worktree / "page.txt").read_text(encoding="utf-8") == "blue done\n"
