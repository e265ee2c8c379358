"""C's refs read from its files (no git process on a warm start's path) agree with git, say
UNSURE where the files cannot say for sure, and a spare is still refused when its task's
branch or a moved base is only in ``packed-refs``."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.workspaces.manager import Workspaces
from harness.workspaces.own_refs import UNSURE, packed_ref, read_ref
from tests.harness.workspaces import workspace_support
from tests.harness.workspaces.test_spare_worktrees import placeholder_branches
from tests.harness.workspaces.workspace_support import git

hermetic_git = workspace_support.hermetic_git
project = workspace_support.project
web = workspace_support.web
workspaces = workspace_support.workspaces

A = "a" * 40
B = "b" * 40
PACKED = f"""# pack-refs with: peeled fully-peeled sorted
{A} refs/heads/main
{B} refs/tags/v1
^{A}
{B} refs/remotes/origin/main
"""


def test_packed_refs_give_a_ref_s_id_and_skip_comments_and_peeled_lines() -> None:
    assert packed_ref(PACKED, "refs/heads/main") == A
    assert packed_ref(PACKED, "refs/tags/v1") == B
    assert packed_ref(PACKED, "refs/remotes/origin/main") == B
    assert packed_ref(PACKED, "refs/heads/other") is None
    assert packed_ref(PACKED, f"^{A}") is None
    assert packed_ref("", "refs/heads/main") is None


@pytest.mark.git
def test_loose_and_packed_refs_read_as_git_reads_them_and_a_missing_one_is_none(
    web: Path,
) -> None:
    common = web / ".git"
    head = git(web, "rev-parse", "main")
    git(web, "branch", "harness/t-1")

    assert read_ref(common, "refs/heads/main") == head  # loose
    git(web, "pack-refs", "--all")
    assert not (common / "refs" / "heads" / "main").exists()
    assert read_ref(common, "refs/heads/main") == head  # packed
    assert read_ref(common, "refs/heads/harness/t-1") == head
    assert read_ref(common, "refs/heads/harness/t-2") is None
    assert read_ref(common, "refs/remotes/origin/main") is None
    (common / "packed-refs").unlink()
    assert read_ref(common, "refs/heads/main") is None


@pytest.mark.git
def test_what_the_files_cannot_say_for_sure_is_unsure(web: Path) -> None:
    common = web / ".git"
    git(web, "symbolic-ref", "refs/heads/alias", "refs/heads/main")
    git(web, "branch", "harness/t-1")

    assert read_ref(common, "refs/heads/alias") == UNSURE  # a symbolic ref: git follows it
    assert read_ref(common, "refs/heads/harness") == UNSURE  # a folder of refs
    assert read_ref(common, "refs/heads/../../config") == UNSURE  # no name git takes
    assert read_ref(common, "HEAD") == UNSURE
    (common / "refs" / "heads" / "odd").write_text("not an id\n", encoding="utf-8")
    assert read_ref(common, "refs/heads/odd") == UNSURE
    (common / "reftable").mkdir()  # refs kept in a reftable: only git can read them
    assert read_ref(common, "refs/heads/main") == UNSURE


@pytest.mark.anyio
@pytest.mark.git
async def test_a_spare_is_not_taken_for_a_task_whose_branch_is_only_packed(
    workspaces: Workspaces, web: Path
) -> None:
    git(web, "branch", "harness/add-login")
    git(web, "pack-refs", "--all")
    view = await workspaces.sandbox_folders.spare_folder("web")

    assert await workspaces.sandbox_folders.adopt_spare(view, "add-login") is None

    assert not (workspaces.root / "add-login").exists()
    await workspaces.sandbox_folders.drop_view(view)
    assert placeholder_branches(web) == []


@pytest.mark.anyio
@pytest.mark.git
async def test_a_spare_is_not_taken_once_its_base_moved_in_packed_refs_alone(
    workspaces: Workspaces, web: Path
) -> None:
    view = await workspaces.sandbox_folders.spare_folder("web")
    (web / "more.txt").write_text("more\n", encoding="utf-8")
    git(web, "add", "more.txt")
    git(web, "commit", "--quiet", "-m", "moved on")
    git(web, "pack-refs", "--all")  # main's new head is in packed-refs, no loose file

    assert await workspaces.sandbox_folders.adopt_spare(view, "late") is None

    assert not (workspaces.root / "late").exists()
    await workspaces.sandbox_folders.drop_view(view)


@pytest.mark.anyio
@pytest.mark.git
async def test_a_spare_whose_base_git_alone_can_resolve_is_taken(
    workspaces: Workspaces, web: Path
) -> None:
    # main as a symbolic ref to trunk: the files cannot say where it is, git can.
    git(web, "branch", "-m", "main", "trunk")
    git(web, "symbolic-ref", "refs/heads/main", "refs/heads/trunk")
    view = await workspaces.sandbox_folders.spare_folder("web")

    task = await workspaces.sandbox_folders.adopt_spare(view, "add-login")

    assert task is not None and task.base_commit == git(web, "rev-parse", "trunk")
    assert git(web, "rev-parse", "harness/add-login") == task.base_commit
