"""A follow-up in a task whose repository vanished (deleted, or its `.git` gone) fails and
says which repository is missing, where, and what to do; it never names a branch that no
longer exists, and the task's worktree keeps its work. Whether the follow-up starts cold or
on the spare its task's last agent left. The real Claude Code CLI in its sandbox against the
scripted model, real git."""

from __future__ import annotations

import dataclasses
import shutil
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from harness.agents.orchestrator import Orchestrator
from harness.project import build_orchestrator, load_project
from harness.runtime.claude import ClaudeRuntime
from harness.runtime.host import AgentHost
from harness.testing.scripted_model import ModelRequest, ScriptedModel, Turn
from harness.workspaces.manager import Workspaces
from tests.harness.workspaces.test_workspace_runs import writer
from tests.support import add_repositories, make_repository

pytestmark = [pytest.mark.anyio, pytest.mark.slow, pytest.mark.git, pytest.mark.subprocess]

WAIT = 60.0


def _delete(repository: Path) -> None:
    shutil.rmtree(repository)


def _delete_git(repository: Path) -> None:
    shutil.rmtree(repository / ".git")


@pytest.fixture
def repository(tmp_path: Path) -> Path:
    return make_repository(tmp_path / "web", {"README.md": "web\n"})


@pytest.fixture(params=[0, 1], ids=["cold", "on-its-spare"])
async def harness(
    request: pytest.FixtureRequest, project_dir: Path, repository: Path
) -> AsyncIterator[tuple[Orchestrator, AgentHost]]:
    config_file = add_repositories(project_dir, {"web": repository}, default="web")
    project = load_project(config_file)
    config = dataclasses.replace(project.config, follow_up_spares=request.param)
    async with ScriptedModel(writer) as model:
        host = AgentHost(ClaudeRuntime(base_env=model.env()), Workspaces(config.workspaces))
        orchestrator = build_orchestrator(dataclasses.replace(project, config=config), host)
        try:
            await orchestrator.keep_warm()
            yield orchestrator, host
        finally:
            await orchestrator.shutdown()


@pytest.mark.parametrize(
    ("vanish", "missing"),
    [(_delete, "does not exist"), (_delete_git, "has no .git")],
    ids=["deleted", "lost-its-git"],
)
async def test_a_follow_up_on_a_vanished_repository_fails_saying_so_and_keeps_the_work(
    harness: tuple[Orchestrator, AgentHost],
    repository: Path,
    vanish: Callable[[Path], None],
    missing: str,
) -> None:
    orchestrator, host = harness
    handle = await orchestrator.draft("developer", "write alpha", repository="web")
    first = await orchestrator.wait(handle.agent_id, WAIT)
    assert first.status == "completed", first.error
    slug = Path(first.cwd).name
    assert first.branch == f"harness/{slug}"
    if host.follow_ups is not None and host.follow_ups.limit:  # its spare is ready
        await host.follow_ups.wait_for(slug, WAIT)
    worktree = Path(first.cwd)
    (worktree / "notes.txt").write_text("uncommitted work\n", encoding="utf-8")
    vanish(repository)

    handle = await orchestrator.draft("developer", "write gamma", task_slug=slug)
    again = await orchestrator.wait(handle.agent_id, WAIT)

    assert again.status == "failed"
    assert again.branch is None and again.head_commit is None  # no branch is claimed
    error = again.error or ""
    assert "cannot find any more" in error and f"{repository} {missing}" in error
    assert "put the repository back" in error
    # The work stays where it was: the first agent's file and what was left uncommitted.
    assert (worktree / "alpha.txt").read_text(encoding="utf-8") == "alpha\n"
    assert (worktree / "notes.txt").read_text(encoding="utf-8") == "uncommitted work\n"
    assert not (worktree / "gamma.txt").exists()


async def test_a_repository_that_vanishes_while_its_agent_works_is_said_and_no_branch_claimed(
    project_dir: Path, repository: Path
) -> None:
    config_file = add_repositories(project_dir, {"web": repository}, default="web")

    def vanishing(request: ModelRequest) -> Turn:
        if not request.tool_results:  # the agent at work: its repository goes meanwhile
            _delete(repository)
        return writer(request)

    async with ScriptedModel(vanishing) as model:
        orchestrator = build_orchestrator(
            load_project(config_file), ClaudeRuntime(base_env=model.env())
        )
        try:
            handle = await orchestrator.draft("developer", "write alpha", repository="web")
            done = await orchestrator.wait(handle.agent_id, WAIT)
        finally:
            await orchestrator.shutdown()

    assert done.status == "failed"
    assert done.branch is None
    error = done.error or ""
    assert "cannot find any more" in error and f"{repository} does not exist" in error
    assert (Path(done.cwd) / "alpha.txt").read_text(encoding="utf-8") == "alpha\n"
