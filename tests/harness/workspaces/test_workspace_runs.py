"""Agents at work in task workspaces: the real Claude Code CLI against the scripted model,
real git repositories in temp folders."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from harness.agents.orchestrator import Orchestrator
from harness.project import build_orchestrator, load_project
from harness.runtime.claude import ClaudeRuntime
from harness.testing.scripted_model import ModelRequest, ScriptedModel, Turn
from tests.support import add_repositories, git, make_repository

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

_CWD = re.compile(r"Primary working directory: (\S+)")


def writer(request: ModelRequest) -> Turn:
    """Writes ``<word>.txt`` in its working folder for the request "write <word>"."""
    if request.tool_results:
        return Turn.finish("wrote it", ["one file"])
    match = _CWD.search(request.system_text)
    assert match, "the CLI names the working directory in the system prompt"
    word = request.first_user_text.strip().splitlines()[-1].split()[-1]
    return Turn.call("Write", file_path=f"{match.group(1)}/{word}.txt", content=f"{word}\n")


@pytest.fixture
async def with_repository(project_dir: Path, tmp_path: Path) -> AsyncIterator[Orchestrator]:
    repository = make_repository(tmp_path / "web", {"README.md": "web\n"})
    config = add_repositories(project_dir, {"web": repository}, default="web")
    async with ScriptedModel(writer) as model:
        orchestrator = build_orchestrator(load_project(config), ClaudeRuntime(base_env=model.env()))
        yield orchestrator
        await orchestrator.shutdown()


async def test_two_tasks_on_one_repository_work_on_their_own_branches(
    with_repository: Orchestrator, project_dir: Path, tmp_path: Path
) -> None:
    orchestrator = with_repository
    first = await orchestrator.draft("developer", "write alpha", repository="web")
    second = await orchestrator.draft("developer", "write beta", repository="web")
    alpha = await orchestrator.wait(first.agent_id, 60)
    beta = await orchestrator.wait(second.agent_id, 60)

    assert (alpha.status, beta.status) == ("completed", "completed")
    assert alpha.branch == f"harness/{first.task_slug}"
    assert beta.branch == f"harness/{second.task_slug}"
    assert alpha.diff_stat is not None and "alpha.txt" in alpha.diff_stat
    assert beta.diff_stat is not None and "alpha.txt" not in beta.diff_stat
    alpha_folder, beta_folder = Path(alpha.cwd), Path(beta.cwd)
    assert alpha_folder != beta_folder
    assert (alpha_folder / "alpha.txt").exists() and not (alpha_folder / "beta.txt").exists()
    assert (beta_folder / "beta.txt").exists() and not (beta_folder / "alpha.txt").exists()
    # Neither the harness's folder nor the repository's own working tree saw any of it.
    assert not list(project_dir.glob("*.txt"))
    assert git(tmp_path / "web", "status", "--porcelain") == ""

    # A follow-up works in the same worktree and sees the earlier work.
    gamma = await orchestrator.run("developer", "write gamma", task_slug=first.task_slug)
    assert gamma.cwd == alpha.cwd and gamma.branch == alpha.branch
    assert gamma.diff_stat is not None
    assert "alpha.txt" in gamma.diff_stat and "gamma.txt" in gamma.diff_stat
    context = await orchestrator.tasks.task_context(first.task_slug)
    assert f"`harness/{first.task_slug}`" in context

    # Each record keeps the full diff as it was when its agent ended.
    first_diff = await orchestrator.tasks.diff(first.task_slug, alpha)
    later_diff = await orchestrator.tasks.diff(first.task_slug, gamma)
    assert first_diff is not None and "+alpha" in first_diff and "gamma" not in first_diff
    assert later_diff is not None and "+alpha" in later_diff and "+gamma" in later_diff


async def test_without_repositories_a_task_works_in_a_scratch_folder_not_the_checkout(
    project_dir: Path,
) -> None:
    async with ScriptedModel(writer) as model:
        project = load_project(project_dir / "config.yaml")
        orchestrator = build_orchestrator(project, ClaudeRuntime(base_env=model.env()))
        record = await orchestrator.run("developer", "write delta")
        await orchestrator.shutdown()

    assert record.status == "completed", record.error
    folder = Path(record.cwd)
    assert (
        folder
        == project.config.workspaces.root / (await orchestrator.tasks.task_summaries())[0].slug
    )
    assert (folder / "delta.txt").read_text(encoding="utf-8") == "delta\n"
    assert not (project_dir / "delta.txt").exists()
    assert record.branch is None
