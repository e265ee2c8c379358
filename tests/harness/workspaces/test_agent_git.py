"""The workspaces' git over what agents wrote (``harness.boundary.git``): a nested repository
is reported and kept, never committed nor looked into; a worktree whose git was relinked is
never read, its base never taken from it; one a crash left empty is filled from its own
branch only. Real git in temp folders; each would-be program is a canary outside."""

from __future__ import annotations

import logging
import os
import shutil
from datetime import timedelta
from pathlib import Path

import pytest

from harness.workspaces.manager import TamperedWorkspaceError, Workspace, Workspaces
from tests.harness.workspaces.workspace_support import age, git, make_repo, settings_for

pytestmark = [pytest.mark.anyio, pytest.mark.git]


@pytest.fixture(autouse=True)
def hermetic_git(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The machine's git config is not read by the test's own git; commits get an identity."""
    config = tmp_path / "gitconfig"
    config.write_text(
        "[user]\n\tname = Test\n\temail = test@example.com\n[init]\n\tdefaultBranch = main\n",
        encoding="utf-8",
    )
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(config))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")


@pytest.fixture
def workspaces(tmp_path: Path) -> Workspaces:
    """Workspaces of the harness's checkout over repository `web`."""
    project = make_repo(tmp_path / "harness", {"config.yaml": "# harness\n"})
    files = {"README.md": "web\n", "src/app.py": "print('hello')\n", "src/util.py": "X = 1\n"}
    web = make_repo(tmp_path / "web", files)
    return Workspaces(settings_for(project, web={"path": str(web)}))


OLD = 1_000_000_000


def filtered_repository(folder: Path, canary: Path) -> None:
    """A repository an agent makes inside its folder, whose config filters every file
    through a program that leaves ``canary``."""
    folder.mkdir(parents=True)
    git(folder, "init", "-q")
    (folder / "a.txt").write_text("hi\n", encoding="utf-8")
    (folder / ".gitattributes").write_text("* filter=x\n", encoding="utf-8")
    git(folder, "add", "-A")
    git(folder, "commit", "-q", "-m", "v")
    git(folder, "config", "filter.x.clean", f"sh -c 'env > {canary}; cat'")
    os.utime(folder / "a.txt", (OLD, OLD))  # read again (through the filter) by any status


async def test_a_nested_repository_is_left_out_of_the_commit_and_named_in_the_report(
    workspaces: Workspaces, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    workspace = await workspaces.prepare("add-login", "web")
    canary = tmp_path / "canary"
    filtered_repository(workspace.path / "vendor", canary)
    git(workspace.path, "add", "vendor")  # the agent's own git, in its sandbox
    canary.unlink(missing_ok=True)
    (workspace.path / "login.py").write_text("def login(): ...\n", encoding="utf-8")

    with caplog.at_level(logging.WARNING):
        report = await workspaces.report(workspace, commit="developer a1: done", author="dev")

    assert not canary.exists()
    assert report is not None
    assert git(workspace.path, "ls-tree", "-r", "--name-only", "HEAD").split() == [
        "README.md",
        "login.py",
        "src/app.py",
        "src/util.py",
    ]
    assert "vendor/: a git repository of its own, not committed" in report.diff_stat
    assert str(workspace.path / "vendor") in report.diff_stat
    assert "vendor" not in report.diff
    assert (workspace.path / "vendor" / "a.txt").read_text(encoding="utf-8") == "hi\n"
    assert "vendor" in caplog.text


async def test_a_worktree_relinked_to_a_git_directory_of_the_agents_is_never_read(
    workspaces: Workspaces, tmp_path: Path
) -> None:
    workspace = await workspaces.prepare("add-login", "web")
    canary = tmp_path / "canary"
    # The agent's own repository, dressed up as the worktree's admin folder.
    fake = workspace.path / ".fake"
    git(tmp_path, "init", "-q", "--bare", str(fake))
    git(fake, "config", "filter.x.clean", f"sh -c 'env > {canary}; cat'")
    admin = fake / "worktrees" / "add-login"
    admin.mkdir(parents=True)
    (admin / "commondir").write_text("../..\n", encoding="utf-8")
    (admin / "gitdir").write_text(f"{workspace.path / '.git'}\n", encoding="utf-8")
    (admin / "HEAD").write_text("ref: refs/heads/harness/add-login\n", encoding="utf-8")
    (workspace.path / ".gitattributes").write_text("* filter=x\n", encoding="utf-8")
    os.utime(workspace.path / "README.md", (OLD, OLD))
    # Its git_dir as recorded: only the chain behind it changed.
    (Path(workspace.git_dir or "") / "commondir").write_text(f"{fake}\n", encoding="utf-8")

    [info] = await workspaces.list()
    with pytest.raises(TamperedWorkspaceError):
        await workspaces.report(workspace, commit="developer a1: done", author="dev")

    assert not canary.exists()
    assert info.problem is not None and "not as the harness made it" in info.problem


async def test_a_worktrees_base_is_read_in_its_repository_never_through_its_git_file(
    workspaces: Workspaces, tmp_path: Path
) -> None:
    workspace = await workspaces.prepare("add-login", "web")
    forged = "1" * 40
    # The agent's own git directory, recording another base for the task's branch, and the
    # worktree's `.git` pointed at it.
    fake = workspace.path / ".fake"
    git(tmp_path, "init", "-q", "--bare", str(fake))
    git(fake, "config", "branch.harness/add-login.harnessBase", forged)
    (workspace.path / ".git").write_text(f"gitdir: {fake}\n", encoding="utf-8")

    found = await workspaces.find("add-login")

    assert found is not None and found.base_commit != forged
    assert workspace.base_commit is not None and workspace.base_commit != forged


def emptied(workspace: Workspace) -> Path:
    """The worktree as a crash between adding it and checking it out leaves it: no index,
    no files; its admin folder."""
    admin = Path(workspace.git_dir or "")
    (admin / "index").unlink()
    for entry in workspace.path.iterdir():
        if entry.name != ".git":
            shutil.rmtree(entry) if entry.is_dir() else entry.unlink()
    return admin


async def test_a_worktree_left_without_its_files_gets_them_at_its_next_prepare(
    workspaces: Workspaces,
) -> None:
    workspace = await workspaces.prepare("add-login", "web")
    admin = emptied(workspace)

    again = await workspaces.prepare("add-login", "web")

    assert (again.path / "src" / "app.py").read_text(encoding="utf-8") == "print('hello')\n"
    assert (admin / "index").is_file()
    assert git(again.path, "status", "--porcelain") == ""


async def test_a_worktree_whose_head_names_another_tasks_branch_is_never_filled_from_it(
    workspaces: Workspaces,
) -> None:
    other = await workspaces.prepare("secret-plan", "web")
    (other.path / "plan.txt").write_text("the other task's work\n", encoding="utf-8")
    git(other.path, "add", "plan.txt")
    git(other.path, "commit", "-q", "-m", "plan")
    workspace = await workspaces.prepare("add-login", "web")
    admin = emptied(workspace)
    # Its agent (the admin folder is writable in its sandbox) points HEAD at the other branch.
    (admin / "HEAD").write_text("ref: refs/heads/harness/secret-plan\n", encoding="utf-8")

    await workspaces.prepare("add-login", "web")

    assert not (workspace.path / "plan.txt").exists()
    assert [entry.name for entry in workspace.path.iterdir()] == [".git"]


async def test_prune_keeps_workspaces_holding_a_repository_no_patch_would_keep(
    workspaces: Workspaces, tmp_path: Path
) -> None:
    worktree = await workspaces.prepare("add-login", "web")
    scratch = await workspaces.prepare("write-a-poem", None)
    canary = tmp_path / "canary"
    for folder in (worktree.path, scratch.path):
        filtered_repository(folder / "vendor", canary)
        (folder / "notes.txt").write_text("notes\n", encoding="utf-8")
        age(folder, 20)
    canary.unlink(missing_ok=True)

    report = await workspaces.prune(timedelta(days=14))

    assert not canary.exists()
    assert report.removed == ()
    assert sorted((k.slug, k.reason) for k in report.kept) == [
        ("add-login", "failed"),
        ("write-a-poem", "failed"),
    ]
    assert all("vendor" in kept.detail for kept in report.kept)
    for folder in (worktree.path, scratch.path):
        assert (folder / "vendor" / "a.txt").read_text(encoding="utf-8") == "hi\n"
        assert (folder / "notes.txt").exists()
