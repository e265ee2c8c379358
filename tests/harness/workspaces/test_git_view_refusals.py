"""What closing an agent's git view refuses: refs naming no commit or missing objects, planted
or linked object files, a rewritten commondir, a linked admin file, another repository's
worktree."""

from __future__ import annotations

import hashlib
import os
import zlib
from pathlib import Path

import pytest

from harness.errors import TamperedWorkspaceError, WorkspaceError
from harness.workspaces.git_view import open_view
from harness.workspaces.manager import Workspace, Workspaces
from tests.harness.workspaces import git_view_support, workspace_support
from tests.harness.workspaces.git_view_support import (
    closed,
    commit_file,
    fsck,
    ok,
    opened,
    private_of,
)
from tests.harness.workspaces.workspace_support import git

# The repository, the harness's checkout and their workspaces, as workspace_support makes them.
hermetic_git = workspace_support.hermetic_git
project = workspace_support.project
web = workspace_support.web
workspaces = workspace_support.workspaces
task = git_view_support.task
common = git_view_support.common

pytestmark = [pytest.mark.anyio, pytest.mark.git]


# --- what closing refuses ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("content", "says"),
    [
        ("1234567890123456789012345678901234567890\n", "is not in the repository"),
        ("ref: refs/heads/main\n", "holding 'ref: refs/heads/main'"),
        (None, "left no branch ref"),
    ],
)
async def test_closing_with_a_ref_naming_no_commit_is_an_error_and_the_branch_stays(
    workspaces: Workspaces,
    task: Workspace,
    common: Path,
    web: Path,
    content: str | None,
    says: str,
) -> None:
    await opened(workspaces, task, common)
    ref = private_of(workspaces, task) / "refs" / task.slug
    if content is None:
        ref.unlink()
    else:
        ref.write_text(content, encoding="utf-8")

    with pytest.raises(WorkspaceError) as caught:
        await closed(workspaces, task, common)

    assert says in caught.value.message
    assert git(web, "rev-parse", "harness/add-login") == task.base_commit


async def test_a_ref_naming_a_tree_or_a_commit_with_missing_objects_is_refused(
    workspaces: Workspaces, task: Workspace, common: Path, web: Path
) -> None:
    view = await opened(workspaces, task, common)
    await commit_file(view, task.path, "login.py", "def login(): ...\n", "login")
    blob = (await ok(view, task.path, "git", "rev-parse", "HEAD:login.py")).strip()
    tree = (await ok(view, task.path, "git", "rev-parse", "HEAD^{tree}")).strip()
    objects = private_of(workspaces, task) / "objects"
    (objects / blob[:2] / blob[2:]).unlink()

    with pytest.raises(WorkspaceError) as incomplete:
        await closed(workspaces, task, common)
    (private_of(workspaces, task) / "refs" / task.slug).write_text(tree + "\n", encoding="utf-8")
    with pytest.raises(WorkspaceError) as not_a_commit:
        await closed(workspaces, task, common)

    assert "has an incomplete history" in incomplete.value.message
    assert "is a tree, not a commit" in not_a_commit.value.message
    assert git(web, "rev-parse", "harness/add-login") == task.base_commit
    # What the agent has is brought in all the same: only the deleted blob is missing (its
    # index names it, so fsck says so).
    assert git(web, "cat-file", "-t", tree) == "tree"


async def test_a_file_planted_under_an_object_s_name_is_never_copied_into_the_repository(
    workspaces: Workspaces, task: Workspace, common: Path
) -> None:
    view = await opened(workspaces, task, common)
    # The name of a blob the operator may commit later, holding another blob.
    blob = hashlib.sha1(b"blob 8\0api_key\n").hexdigest()
    planted = private_of(workspaces, task) / "objects"
    assert str(planted) in view.env.values()
    (planted / blob[:2]).mkdir()
    (planted / blob[:2] / blob[2:]).write_bytes(zlib.compress(b"blob 6\0evil!\n"))
    (planted / "ab").mkdir()
    (planted / "ab" / ("ab" * 19)).write_bytes(zlib.compress(b"not an object"))
    (planted / "cd").mkdir()
    (planted / "cd" / ("ef" * 19)).symlink_to(next((common / "objects").rglob("*/*")))
    (planted / "pack").mkdir(exist_ok=True)
    (planted / "pack" / "pack-00.pack").write_bytes(b"PACK junk")
    (planted / "pack" / "pack-00.idx").write_bytes(b"junk")

    assert await closed(workspaces, task, common) is None

    for objects in (common / "objects", common / "harness/tasks" / task.slug):
        assert not (objects / blob[:2] / blob[2:]).exists()
        assert not (objects / "ab" / ("ab" * 19)).exists()
        assert not (objects / "cd" / ("ef" * 19)).exists()
        assert not (objects / "pack" / "pack-00.pack").exists()
        assert not [p for p in objects.rglob("tmp_*")]
    assert fsck(common) == ""


async def test_object_folders_linked_to_another_task_s_store_bring_none_of_its_objects(
    workspaces: Workspaces, task: Workspace, common: Path, web: Path
) -> None:
    other = await workspaces.prepare("other-task", "web")
    other_view = await opened(workspaces, other, common)
    await commit_file(other_view, other.path, "secret.py", "KEY = 'other'\n", "secret")
    await ok(other_view, other.path, "git", "repack", "-d", "-q", "-l")
    await commit_file(other_view, other.path, "loose.py", "KEY = 'loose'\n", "loose")
    assert await closed(workspaces, other, common) is not None
    store = common / "harness/tasks" / other.slug
    loose = next(p for p in store.iterdir() if len(p.name) == 2)
    assert [p for p in (store / "pack").iterdir() if p.suffix == ".pack"]
    secret = git(web, "rev-parse", "harness/other-task")
    view = await opened(workspaces, task, common)
    # The agent links its own object folders to the other task's store (a path it can guess).
    planted = private_of(workspaces, task) / "objects"
    assert str(planted) in view.env.values()
    if (planted / "pack").exists():
        os.rmdir(planted / "pack")
    (planted / "pack").symlink_to(store / "pack")
    (planted / loose.name).symlink_to(loose)

    await closed(workspaces, task, common)

    mine = common / "harness/tasks" / task.slug
    copied = [p.name for p in mine.rglob("*") if p.is_file()] if mine.exists() else []
    others = {p.name for p in store.rglob("*") if p.is_file()}
    assert not set(copied) & others
    assert secret not in (await opened(workspaces, task, common)).env.values()
    assert fsck(common) == ""


async def test_a_rewritten_commondir_makes_opening_the_view_fail_as_tampered(
    workspaces: Workspaces, task: Workspace, common: Path, tmp_path: Path
) -> None:
    fake = tmp_path / "fake.git"
    git(tmp_path, "init", "--quiet", "--bare", str(fake))
    (Path(task.git_dir or "") / "commondir").write_text(f"{fake}\n", encoding="utf-8")

    with pytest.raises(TamperedWorkspaceError) as caught:
        await opened(workspaces, task, common)
    with pytest.raises(TamperedWorkspaceError):
        await closed(workspaces, task, common)

    assert f"commondir does not lead to {common}" in caught.value.message
    assert str(fake) not in caught.value.message  # what the agent wrote is never quoted


@pytest.mark.parametrize("name", ["gitdir", "commondir"])
async def test_an_admin_file_linked_to_a_secret_is_tampering_and_the_secret_is_never_quoted(
    workspaces: Workspaces, task: Workspace, common: Path, tmp_path: Path, name: str
) -> None:
    secret = tmp_path / "config.yaml"
    secret.write_text("slack:\n  botToken: xoxb-SECRET-FROM-CONFIG\n", encoding="utf-8")
    admin_file = Path(task.git_dir or "") / name
    admin_file.unlink()
    admin_file.symlink_to(secret)  # the admin folder is writable in the agent's sandbox

    with pytest.raises(TamperedWorkspaceError) as caught:
        await opened(workspaces, task, common)

    assert "xoxb-SECRET" not in caught.value.message and "xoxb-SECRET" not in str(caught.value)
    assert "not a small text file" in caught.value.message


async def test_a_worktree_of_another_repository_is_refused_as_tampered(
    workspaces: Workspaces, task: Workspace, tmp_path: Path
) -> None:
    other = tmp_path / "other.git"
    git(tmp_path, "init", "--quiet", "--bare", str(other))

    with pytest.raises(TamperedWorkspaceError) as caught:
        await open_view(task, other, tmp_path / "private")

    assert "not a folder of" in caught.value.message
