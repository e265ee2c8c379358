"""Workspaces against real git repositories in temp folders (no network: a `url` repository is
a local bare repository reached through a file:// URL): a task's worktree or scratch folder
prepared, its changes, commits and patch, and what goes wrong."""

from __future__ import annotations

import asyncio
import os
import subprocess
from pathlib import Path

import pytest

from harness.config.settings import parse_config
from harness.workspaces.manager import FileChange, GitError, Workspace, WorkspaceError, Workspaces
from tests.harness.workspaces.workspace_support import git, settings_for

pytestmark = [pytest.mark.anyio, pytest.mark.git]


async def test_two_tasks_on_one_repository_get_two_worktrees_on_two_branches(
    workspaces: Workspaces, project: Path, web: Path
) -> None:
    first = await workspaces.prepare("add-login", "web")
    second = await workspaces.prepare("fix-footer", "web")

    root = project / ".agents" / "workspaces"
    assert (first.path, second.path) == (root / "add-login", root / "fix-footer")
    assert (first.branch, second.branch) == ("harness/add-login", "harness/fix-footer")
    assert first.repository == second.repository == "web"
    assert first.base_commit == second.base_commit == git(web, "rev-parse", "main")
    assert git(first.path, "rev-parse", "--abbrev-ref", "HEAD") == "harness/add-login"
    assert (first.path / "src" / "app.py").read_text(encoding="utf-8") == "print('hello')\n"
    (first.path / "notes.txt").write_text("only here\n", encoding="utf-8")
    assert not (second.path / "notes.txt").exists()
    assert not (web / "notes.txt").exists()


async def test_preparing_a_task_again_returns_its_worktree_with_the_work_in_it(
    workspaces: Workspaces,
) -> None:
    first = await workspaces.prepare("add-login", "web")
    (first.path / "src" / "app.py").write_text("print('changed')\n", encoding="utf-8")

    again = await workspaces.prepare("add-login", "web")

    assert again == first
    assert (again.path / "src" / "app.py").read_text(encoding="utf-8") == "print('changed')\n"
    assert await workspaces.find("add-login") == first


async def test_five_tasks_prepared_at_once_on_one_repository_all_get_worktrees(
    workspaces: Workspaces, web: Path
) -> None:
    slugs = [f"task-{n}" for n in range(5)]

    prepared = await asyncio.gather(*(workspaces.prepare(slug, "web") for slug in slugs))

    assert [w.branch for w in prepared] == [f"harness/{slug}" for slug in slugs]
    for workspace in prepared:
        assert (workspace.path / "README.md").read_text(encoding="utf-8") == "web\n"
        assert git(workspace.path, "status", "--porcelain") == ""
    listed = git(web, "worktree", "list", "--porcelain")
    assert all(f"branch refs/heads/harness/{slug}" in listed for slug in slugs)


async def test_changes_report_modified_untracked_and_committed_files_with_branch_and_head(
    workspaces: Workspaces,
) -> None:
    workspace = await workspaces.prepare("add-login", "web")
    (workspace.path / "login.py").write_text("def login():\n    pass\n", encoding="utf-8")
    git(workspace.path, "add", "login.py")
    git(workspace.path, "commit", "--quiet", "-m", "login")
    (workspace.path / "src" / "app.py").write_text("print('hi')\nlogin()\n", encoding="utf-8")
    (workspace.path / "src" / "util.py").unlink()
    (workspace.path / "NEW.md").write_text("new\n", encoding="utf-8")

    changes = await workspaces.changes(workspace)

    assert changes is not None
    assert changes.branch == "harness/add-login"
    assert changes.head == git(workspace.path, "rev-parse", "HEAD")
    assert changes.base == workspace.base_commit
    assert changes.commits == 1
    assert changes.uncommitted is True
    assert changes.files == (
        FileChange("NEW.md", "added", 1, 0),
        FileChange("login.py", "added", 2, 0),
        FileChange("src/app.py", "modified", 2, 1),
        FileChange("src/util.py", "deleted", 0, 1),
    )
    assert changes.summary() == (
        "4 files changed, 5 insertions(+), 2 deletions(-); 1 commit, uncommitted work"
    )
    # The agent's own index is left as it was: the new file is still untracked.
    assert "?? NEW.md" in git(workspace.path, "status", "--porcelain").splitlines()


async def test_commit_records_edits_and_new_files_on_the_task_branch_as_the_harness(
    workspaces: Workspaces, web: Path
) -> None:
    workspace = await workspaces.prepare("add-login", "web")
    (workspace.path / "src" / "app.py").write_text("login()\n", encoding="utf-8")
    (workspace.path / "login.py").write_text("def login(): ...\n", encoding="utf-8")

    made = await workspaces.commit(workspace, "developer a1: add login", author="harness dev")
    again = await workspaces.commit(workspace, "nothing left", author="harness dev")

    assert made == git(web, "rev-parse", "harness/add-login") and again is None
    assert git(web, "show", "harness/add-login:login.py") == "def login(): ..."
    assert git(web, "log", "-1", "--format=%an <%ae>|%s", "harness/add-login") == (
        "harness dev <harness@localhost>|developer a1: add login"
    )
    assert git(workspace.path, "status", "--porcelain") == ""
    assert git(web, "rev-parse", "main") == workspace.base_commit  # the base is untouched


async def test_commit_does_nothing_in_a_scratch_folder_or_when_turned_off(
    project: Path, web: Path
) -> None:
    config = parse_config(
        {"workspaces": {"commitWork": False, "repositories": {"web": {"path": str(web)}}}},
        file=project / "config.yaml",
    )
    workspaces = Workspaces(config.workspaces)
    worktree = await workspaces.prepare("add-login", "web")
    scratch = await workspaces.prepare("write-a-poem", None)
    for workspace in (worktree, scratch):
        (workspace.path / "notes.txt").write_text("draft\n", encoding="utf-8")

    assert await workspaces.commit(worktree, "m", author="a") is None
    assert await workspaces.commit(scratch, "m", author="a") is None
    assert "?? notes.txt" in git(worktree.path, "status", "--porcelain")


async def test_patch_holds_every_change_since_the_base_and_applies_to_it(
    workspaces: Workspaces, web: Path, tmp_path: Path
) -> None:
    workspace = await workspaces.prepare("add-login", "web")
    (workspace.path / "README.md").write_text("web, with login\n", encoding="utf-8")
    (workspace.path / "logo.bin").write_bytes(bytes(range(256)))

    patch = await workspaces.patch(workspace)

    copy = tmp_path / "copy"
    git(web, "worktree", "add", "--quiet", "--detach", str(copy), "main")
    (tmp_path / "all.patch").write_text(patch, encoding="utf-8", errors="surrogateescape")
    git(copy, "apply", str(tmp_path / "all.patch"))
    assert (copy / "README.md").read_text(encoding="utf-8") == "web, with login\n"
    assert (copy / "logo.bin").read_bytes() == bytes(range(256))


async def test_a_task_without_a_repository_gets_a_scratch_folder_and_the_checkout_is_untouched(
    workspaces: Workspaces, project: Path
) -> None:
    head = git(project, "rev-parse", "HEAD")

    workspace = await workspaces.prepare("write-a-poem", None)

    assert workspace == Workspace("write-a-poem", project / ".agents/workspaces/write-a-poem")
    assert workspace.path.is_dir()
    assert workspace.path != project
    assert await workspaces.changes(workspace) is None
    assert await workspaces.patch(workspace) == ""
    (workspace.path / "poem.txt").write_text("roses\n", encoding="utf-8")
    assert git(project, "status", "--porcelain") == ""
    assert git(project, "rev-parse", "HEAD") == head
    # A repository of its own: git in the scratch folder never finds the checkout, with the
    # workspace's environment or without (a person opening a shell there).
    for env in (os.environ, {**os.environ, **workspace.env}):
        found = subprocess.run(
            ["git", "rev-parse", "--show-toplevel"],
            cwd=workspace.path,
            env=env,
            capture_output=True,
            text=True,
            check=True,
        )
        assert found.stdout.strip() == str(workspace.path)


async def test_a_task_keeps_the_kind_of_workspace_it_started_with(
    workspaces: Workspaces,
) -> None:
    await workspaces.prepare("write-a-poem", None)
    await workspaces.prepare("add-login", "web")

    with pytest.raises(WorkspaceError) as scratch:
        await workspaces.prepare("write-a-poem", "web")
    with pytest.raises(WorkspaceError) as worktree:
        await workspaces.prepare("add-login", None)

    assert "a scratch folder, not a worktree of 'web'" in scratch.value.message
    assert "a worktree of 'web', not a scratch folder" in worktree.value.message
    assert "start a new task" in worktree.value.fix


async def test_an_unknown_repository_is_an_error_that_suggests_the_name(
    workspaces: Workspaces,
) -> None:
    with pytest.raises(WorkspaceError) as caught:
        await workspaces.prepare("add-login", "wbe")

    assert caught.value.message == "unknown repository 'wbe'; known repositories: web"
    assert caught.value.fix.startswith("did you mean 'web'?")


async def test_a_missing_base_branch_is_an_error_listing_the_branches(
    project: Path, web: Path
) -> None:
    workspaces = Workspaces(settings_for(project, web={"path": str(web), "baseBranch": "dev"}))

    with pytest.raises(WorkspaceError) as caught:
        await workspaces.prepare("add-login", "web")

    assert caught.value.message == "repository 'web' has no branch 'dev' (its branches: main)"
    assert "baseBranch" in caught.value.fix


async def test_a_repository_path_that_is_not_a_git_repository_is_an_error(
    project: Path, tmp_path: Path
) -> None:
    (tmp_path / "plain").mkdir()
    workspaces = Workspaces(settings_for(project, web={"path": str(tmp_path / "plain")}))

    with pytest.raises(WorkspaceError) as caught:
        await workspaces.prepare("add-login", "web")

    assert caught.value.message == f"repository 'web': {tmp_path / 'plain'} is not a git repository"
    assert "workspaces.repositories.web.path" in caught.value.fix


async def test_an_unreachable_url_is_an_error_and_leaves_no_cache_behind(
    project: Path, tmp_path: Path
) -> None:
    settings = settings_for(project, api={"url": (tmp_path / "nowhere.git").as_uri()})
    workspaces = Workspaces(settings)

    with pytest.raises(GitError) as caught:
        await workspaces.prepare("add-login", "api")

    assert "git clone" in caught.value.message
    assert "reachable" in caught.value.fix
    cache = settings.repositories["api"].cache
    assert cache is not None and not cache.exists()
    assert list(cache.parent.iterdir()) == []


async def test_a_worktree_deleted_by_hand_is_made_again_on_its_branch(
    workspaces: Workspaces, web: Path
) -> None:
    first = await workspaces.prepare("add-login", "web")
    (first.path / "login.py").write_text("x = 1\n", encoding="utf-8")
    git(first.path, "add", "login.py")
    git(first.path, "commit", "--quiet", "-m", "login")
    subprocess.run(["rm", "-rf", str(first.path)], check=True)

    again = await workspaces.prepare("add-login", "web")

    assert again == first
    assert (again.path / "login.py").read_text(encoding="utf-8") == "x = 1\n"


async def test_a_url_repository_is_cloned_into_its_cache_once_and_fetched_for_the_next_task(
    project: Path, web: Path, tmp_path: Path
) -> None:
    origin = tmp_path / "origin.git"
    git(tmp_path, "clone", "--quiet", "--bare", str(web), str(origin))
    settings = settings_for(project, api={"url": origin.as_uri()})
    cache = settings.repositories["api"].cache
    assert cache == project / ".agents/workspaces/.repos/api"
    workspaces = Workspaces(settings)

    first = await workspaces.prepare("first-task", "api")
    assert cache.is_dir()
    marker = cache / "cloned-once"
    marker.write_text("", encoding="utf-8")
    (web / "news.txt").write_text("pushed later\n", encoding="utf-8")
    git(web, "add", "news.txt")
    git(web, "commit", "--quiet", "-m", "news")
    git(web, "push", "--quiet", str(origin), "main")

    second = await workspaces.prepare("second-task", "api")

    assert marker.exists()  # the same cache, fetched rather than cloned again
    assert not (first.path / "news.txt").exists()
    assert (second.path / "news.txt").read_text(encoding="utf-8") == "pushed later\n"
    assert second.base_commit == git(web, "rev-parse", "main") != first.base_commit
    assert (await workspaces.prepare("first-task", "api")) == first  # a follow-up
    assert [info.repository for info in await workspaces.list()] == ["api", "api"]
