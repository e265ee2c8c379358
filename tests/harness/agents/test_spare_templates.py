"""What the orchestrator asks its host to keep warm: each role's spares in the workspace a new
task gets by default (the default repository's worktree), or in the named repositories'."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest

from harness.config.settings import RepositorySettings, WorkspaceSettings
from harness.project import Project, build_orchestrator
from harness.runtime.claude import ClaudeRuntime
from harness.runtime.host import AgentHost
from harness.runtime.spec import AgentSpec, SpareLimits
from harness.workspaces.manager import Workspaces

pytestmark = pytest.mark.anyio


class RecordingHost(AgentHost):
    def __init__(self, workspaces: Workspaces) -> None:
        super().__init__(ClaudeRuntime(), workspaces)
        self.kept: list[tuple[AgentSpec, int]] = []

    def keep_warm(
        self,
        templates: Sequence[tuple[AgentSpec, int]],
        follow_ups: int = 0,
        *,
        limits: SpareLimits | None = None,
        busy: Callable[[], bool] | None = None,
    ) -> None:
        self.kept = list(templates)


async def kept_for(project: Project, tmp_path: Path, **workspaces: object) -> list[str]:
    """``role repository count`` of each template kept warm ("-" for a scratch folder)."""
    settings = WorkspaceSettings(root=tmp_path / "workspaces", **workspaces)  # type: ignore[arg-type]
    config = dataclasses.replace(
        project.config, workspaces=settings, spares={"developer": 1, "reviewer": {"api": 2}}
    )
    host = RecordingHost(Workspaces(settings))
    orchestrator = build_orchestrator(dataclasses.replace(project, config=config), host)
    try:
        await orchestrator.keep_warm()
    finally:
        await orchestrator.shutdown()
    return [
        f"{t.role.name} {t.workspace.repository if t.workspace else '-'} {n}" for t, n in host.kept
    ]


async def test_spares_are_kept_in_the_default_repository_and_in_those_named(
    project: Project, tmp_path: Path
) -> None:
    web = RepositorySettings("web", path=tmp_path / "web")
    api = RepositorySettings("api", path=tmp_path / "api")

    kept = await kept_for(project, tmp_path, repositories={"web": web, "api": api}, default="web")

    assert kept == ["developer web 1", "reviewer api 2"]


async def test_with_no_default_repository_a_role_s_count_keeps_scratch_spares(
    project: Project, tmp_path: Path
) -> None:
    web = RepositorySettings("web", path=tmp_path / "web")
    api = RepositorySettings("api", path=tmp_path / "api")

    kept = await kept_for(project, tmp_path, repositories={"web": web, "api": api})

    assert kept == ["developer - 1", "reviewer api 2"]
