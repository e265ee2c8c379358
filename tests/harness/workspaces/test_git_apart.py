"""Tasks apart in git: a task's sandbox view (``git_view``) shows its own branch and the base,
never another task's objects, refs, worktree folder or index, while the repository itself
holds every task's work, whole. Real git in real bubblewrap, against temp repositories."""

from __future__ import annotations

import os
import subprocess
from datetime import timedelta
from pathlib import Path

import pytest

from harness.workspaces.manager import Workspace, Workspaces
from harness.workspaces.repos import fetch
from tests.harness.workspaces import git_view_support, workspace_support
from tests.harness.workspaces.git_view_support import closed, commit_file, fsck, inside, ok, opened
from tests.harness.workspaces.workspace_support import age, git

hermetic_git = workspace_support.hermetic_git
project = workspace_support.project
web = workspace_support.web
workspaces = workspace_support.workspaces
task = git_view_support.task
common = git_view_support.common

pytestmark = [pytest.mark.anyio, pytest.mark.git]

SECRET = "the-other-task-s-secret"


async def other_task_s_work(workspaces: Workspaces, common: Path) -> tuple[Workspace, str]:
    """Task fix-footer commits SECRET in its own view and leaves it staged in its index;
    its work is settled. Its commit."""
    other = await workspaces.prepare("fix-footer", "web")
    view = await opened(workspaces, other, common)
    await commit_file(view, other.path, "footer.html", f"<footer>{SECRET}</footer>\n", SECRET)
    (other.path / "staged.txt").write_text(f"staged {SECRET}\n", encoding="utf-8")
    await ok(view, other.path, "git", "add", "staged.txt")
    made = await closed(workspaces, other, common)
    assert made is not None
    return other, made


async def everything_shown(view_of: Workspace, common: Path, workspaces: Workspaces) -> str:
    """What every way of looking at git in ``view_of``'s view shows, as one text."""
    view = await opened(workspaces, view_of, common)
    looks = [
        "git cat-file --batch-all-objects --batch",
        "git log --all --format='%H %D %s'",
        "git for-each-ref",
        "git rev-list --all --objects",
        "git worktree list --porcelain",
        "git config --list",
        f"cat {common}/packed-refs {common}/config {common}/HEAD",
        f"ls -R {common}",
        f"cat {common}/worktrees/*/HEAD {common}/worktrees/*/index {common}/info/refs",
        f"cat {common}/objects/info/alternates {common}/harness/objects/info/alternates",
        "git fsck --no-dangling",
    ]
    shown = [await inside(view, view_of.path, "sh", "-c", look) for look in looks]
    return "\n".join(out for _, out in shown)


async def test_another_task_s_commits_index_and_branch_are_in_no_view_even_packed(
    workspaces: Workspaces, task: Workspace, common: Path, web: Path
) -> None:
    other, made = await other_task_s_work(workspaces, common)
    git(web, "gc", "--quiet")  # as an operator might: every ref packed, info/refs written
    assert "refs/heads/harness/fix-footer" in (common / "packed-refs").read_text()
    assert "harness/fix-footer" in (common / "info/refs").read_text()

    shown = await everything_shown(task, common, workspaces)

    for secret in (SECRET, "fix-footer", made):
        assert secret not in shown
    assert "refs/heads/harness/add-login" in shown  # its own branch is there
    # The repository has every task's work, whole, and its own objects hold none of it.
    assert fsck(common) == ""
    staged = git(other.path, "rev-parse", ":staged.txt")  # the blob its index names
    assert git(web, "cat-file", "-p", staged) == f"staged {SECRET}"
    assert SECRET in git(web, "log", "--all", "--format=%s")
    assert not (common / "objects" / made[:2] / made[2:]).exists()
    assert git(web, "count-objects", "-v").count("alternate:") == 3  # the pool, two stores


async def test_what_another_task_settles_while_a_view_is_open_is_not_shown_there(
    workspaces: Workspaces, task: Workspace, common: Path
) -> None:
    view = await opened(workspaces, task, common)

    _, made = await other_task_s_work(workspaces, common)
    listed = await ok(view, task.path, "git", "cat-file", "--batch-all-objects", "--batch-check")
    shown, _ = await inside(view, task.path, "git", "cat-file", "-t", made)

    assert made not in listed and shown != 0
    await commit_file(view, task.path, "login.py", "x = 1\n", "login")
    assert await closed(workspaces, task, common) is not None
    assert fsck(common) == ""


async def test_a_task_s_own_settled_and_harness_made_commits_are_in_its_next_view(
    workspaces: Workspaces, task: Workspace, common: Path, web: Path
) -> None:
    view = await opened(workspaces, task, common)
    await commit_file(view, task.path, "one.txt", "1\n", "one")
    await closed(workspaces, task, common)
    (task.path / "two.txt").write_text("2\n", encoding="utf-8")
    assert await workspaces.commit(task, "two", author="harness dev") is not None
    # Its P's objects lost (as a pruned workspace's are): its store still has them.
    store = common / "harness/tasks" / task.slug
    for folder in (workspaces.root / ".sandbox" / task.slug / "objects").iterdir():
        if len(folder.name) == 2:
            for file in folder.iterdir():
                file.unlink()

    view = await opened(workspaces, task, common)
    log = await ok(view, task.path, "git", "log", "--format=%s")
    status = await ok(view, task.path, "git", "status", "--porcelain")

    assert log.split() == ["two", "one", "initial"] and status == ""
    assert any(store.iterdir())


async def test_a_pruned_task_s_branch_keeps_its_objects(
    workspaces: Workspaces, task: Workspace, common: Path, web: Path
) -> None:
    view = await opened(workspaces, task, common)
    await commit_file(view, task.path, "login.py", "def login(): ...\n", "login")
    await closed(workspaces, task, common)
    age(task.path, 20)

    report = await workspaces.prune(timedelta(days=14))

    assert [r.slug for r in report.removed] == ["add-login"]
    assert git(web, "show", "harness/add-login:login.py") == "def login(): ..."
    assert fsck(common) == ""
    git(web, "gc", "--quiet", "--prune=now")
    assert git(web, "show", "harness/add-login:login.py") == "def login(): ..."


async def test_a_remote_s_copy_of_another_task_s_branch_is_in_no_view(
    workspaces: Workspaces, task: Workspace, common: Path, web: Path, tmp_path: Path
) -> None:
    origin = tmp_path / "origin.git"
    git(tmp_path, "init", "--quiet", "--bare", str(origin))
    git(web, "remote", "add", "origin", str(origin))
    _, made = await other_task_s_work(workspaces, common)
    # As a pull request's push to a named remote leaves it: a remote-tracking copy.
    git(web, "push", "--quiet", "origin", "harness/fix-footer:harness/fix-footer")
    assert (common / "refs/remotes/origin/harness/fix-footer").is_file()

    view = await opened(workspaces, task, common)
    refs = await ok(view, task.path, "git", "for-each-ref", "--format=%(refname)")
    listed = await ok(view, task.path, "ls", "-R", f"{common}/refs", f"{common}/logs")

    assert "fix-footer" not in refs + listed and made not in refs
    assert git(web, "rev-parse", "origin/harness/fix-footer") == made
    # The push took the branch's objects from the task's store: the remote has them whole.
    assert git(origin, "show", f"{made}:footer.html") == f"<footer>{SECRET}</footer>"
    assert git(origin, "fsck", "--no-dangling") == ""


async def test_a_url_cache_fetches_no_task_branch_of_its_remote(tmp_path: Path, web: Path) -> None:
    origin = tmp_path / "origin.git"
    git(tmp_path, "clone", "--quiet", "--bare", str(web), str(origin))
    cache = tmp_path / "cache.git"
    # A cache cloned before task branches were kept out, holding one the remote had.
    git(tmp_path, "clone", "--quiet", "--bare", str(origin), str(cache))
    git(cache, "config", "remote.origin.fetch", "+refs/heads/*:refs/remotes/origin/*")
    git(origin, "branch", "harness/old", "main")
    git(cache, "fetch", "--quiet", "origin")
    git(origin, "branch", "harness/pushed", "main")

    await fetch(origin.as_uri(), cache)
    await fetch(origin.as_uri(), cache)  # again: the refspec is added once

    refs = git(cache, "for-each-ref", "--format=%(refname)", "refs/remotes").split()
    assert refs == ["refs/remotes/origin/main"]
    specs = git(cache, "config", "--get-all", "remote.origin.fetch").splitlines()
    assert specs == ["+refs/heads/*:refs/remotes/origin/*", "^refs/heads/harness/*"]


async def test_objects_env_sends_the_harness_s_own_objects_to_the_task_s_store(
    workspaces: Workspaces, task: Workspace, common: Path, web: Path
) -> None:
    env = await workspaces.sandbox_git.objects_env(task)
    scratch = await workspaces.prepare("write-a-poem", None)

    assert await workspaces.sandbox_git.objects_env(scratch) is None
    assert env == {
        "GIT_OBJECT_DIRECTORY": str(common / "harness/tasks" / task.slug),
        "GIT_ALTERNATE_OBJECT_DIRECTORIES": str(common / "harness/own"),
    }
    (task.path / "notes.txt").write_text("by the harness\n", encoding="utf-8")
    done = subprocess.run(
        ["git", "hash-object", "-w", "notes.txt"],
        cwd=task.path, env={**os.environ, **env}, capture_output=True, text=True, check=True,
    )  # fmt: skip
    blob = done.stdout.strip()
    assert (common / "harness/tasks" / task.slug / blob[:2] / blob[2:]).is_file()
    assert git(web, "cat-file", "-p", blob) == "by the harness"


async def test_an_object_of_the_base_the_agent_writes_again_stays_only_in_the_repository(
    workspaces: Workspaces, task: Workspace, common: Path, web: Path
) -> None:
    git(web, "gc", "--quiet")  # the base packed: the sandbox cannot touch its objects
    readme = git(web, "rev-parse", "main:README.md")
    view = await opened(workspaces, task, common)
    # The same content as the base's README: git in the sandbox writes it again, in P.
    await commit_file(view, task.path, "copy.md", "web\n", "a copy")
    assert (workspaces.root / ".sandbox" / task.slug / "objects" / readme[:2]).is_dir()

    assert await closed(workspaces, task, common) is not None
    store = common / "harness/tasks" / task.slug

    assert not (store / readme[:2] / readme[2:]).exists()
    git(web, "gc", "--quiet")  # would drop the README's blob were a store to hold it too
    other = await workspaces.prepare("fix-footer", "web")
    shown = await ok(await opened(workspaces, other, common), other.path, "git", "show",
                     "HEAD:README.md")  # fmt: skip
    assert shown.strip() == "web" and fsck(common) == ""


async def test_a_task_s_work_merged_into_the_base_is_in_every_later_task_s_view(
    workspaces: Workspaces, task: Workspace, common: Path, web: Path
) -> None:
    view = await opened(workspaces, task, common)
    await opened(workspaces, task, common)  # the repository's public history checked once
    await commit_file(view, task.path, "login.py", "def login(): ...\n", "login")
    made = await closed(workspaces, task, common)
    assert made is not None
    # The operator merges it: git writes none of the task's objects again, its store has them.
    git(web, "merge", "--quiet", "--no-ff", "-m", "merge login", "harness/add-login")
    assert not (common / "objects" / made[:2] / made[2:]).exists()

    later = await workspaces.prepare("fix-footer", "web")
    view = await opened(workspaces, later, common)
    log = await ok(view, later.path, "git", "log", "--format=%s")
    shown = await ok(view, later.path, "git", "show", "HEAD:login.py")

    assert sorted(log.split()) == ["initial", "login", "login", "merge"]
    assert shown == "def login(): ...\n"
    # Moved out of the task's store: the repository's own `gc` keeps it.
    assert (common / "objects" / made[:2] / made[2:]).exists()
    assert not (common / "harness/tasks/add-login" / made[:2] / made[2:]).exists()
    git(web, "gc", "--quiet")
    assert (await ok(view, later.path, "git", "show", "HEAD:login.py")) == shown
    assert fsck(common) == ""


async def test_a_harness_commit_naming_another_task_s_object_is_completed_in_its_store(
    workspaces: Workspaces, task: Workspace, common: Path, web: Path
) -> None:
    other = await workspaces.prepare("fix-footer", "web")
    view = await opened(workspaces, other, common)
    await commit_file(view, other.path, "same.txt", "the same text\n", "theirs")
    await closed(workspaces, other, common)
    blob = git(web, "rev-parse", "harness/fix-footer:same.txt")
    # The harness commits the same file for this task: git, seeing every store, writes it not.
    (task.path / "same.txt").write_text("the same text\n", encoding="utf-8")
    assert await workspaces.commit(task, "mine", author="harness dev") is not None
    assert not (common / "objects" / blob[:2] / blob[2:]).exists()

    view = await opened(workspaces, task, common)
    shown = await ok(view, task.path, "git", "show", "HEAD:same.txt")
    status = await ok(view, task.path, "git", "status", "--porcelain")

    assert shown == "the same text\n" and status == ""
    assert (common / "harness/tasks" / task.slug / blob[:2] / blob[2:]).is_file()
    assert fsck(common) == ""
