"""A spare worktree's placeholder branch is gone once a task adopts the spare, or once the
spare is dropped, also when git packed it meanwhile (``git gc`` packs refs): its loose
files are removed by hand and the packed refs read without a git process."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.workspaces.manager import Workspaces
from harness.workspaces.spare_worktrees import placeholder
from tests.harness.workspaces import workspace_support
from tests.harness.workspaces.test_spare_worktrees import placeholder_branches
from tests.harness.workspaces.workspace_support import git

hermetic_git = workspace_support.hermetic_git
project = workspace_support.project
web = workspace_support.web
workspaces = workspace_support.workspaces

pytestmark = [pytest.mark.anyio, pytest.mark.git]


@pytest.mark.parametrize("packed", [False, True])
async def test_an_adopted_spares_placeholder_branch_is_gone_packed_or_not(
    workspaces: Workspaces, web: Path, packed: bool
) -> None:
    view = await workspaces.sandbox_folders.spare_folder("web")
    if packed:
        git(web, "pack-refs", "--all")
        assert f"harness/{placeholder(view)}" in git(web, "show-ref")

    task = await workspaces.sandbox_folders.adopt_spare(view, "add-login")

    assert task is not None and task.branch == "harness/add-login"
    assert placeholder_branches(web) == []
    assert git(web, "rev-parse", "harness/add-login") == task.base_commit
    assert git(web, "config", "--get-regexp", "^branch\\.") == (
        f"branch.harness/add-login.harnessbase {task.base_commit}"
    )


async def test_a_dropped_spares_packed_placeholder_branch_is_gone(
    workspaces: Workspaces, web: Path
) -> None:
    view = await workspaces.sandbox_folders.spare_folder("web")
    git(web, "pack-refs", "--all")

    await workspaces.sandbox_folders.drop_view(view)

    assert placeholder_branches(web) == []
    assert "harness/_" not in git(web, "show-ref")
