"""Worktrees made ahead for spare agents (``spare_worktrees``): made at a view path on a
placeholder branch, adopted by a new task as the worktree ``prepare`` would have made, or
removed leaving nothing; against real repositories in temp folders and real bubblewrap."""

from __future__ import annotations

import asyncio
import shutil
from datetime import timedelta
from pathlib import Path

import pytest

from harness.config.settings import WorkspaceSettings
from harness.errors import WorkspaceError
from harness.sandbox.layout import Bind
from harness.workspaces.choice import default_repository
from harness.workspaces.git_view import SANDBOXES, GitView
from harness.workspaces.manager import Workspaces
from harness.workspaces.spare_worktrees import placeholder, private_shown, shown_in_view
from harness.workspaces.views import VIEWS
from tests.harness.workspaces import git_view_support, workspace_support
from tests.harness.workspaces.git_view_support import inside, sandbox_args
from tests.harness.workspaces.workspace_support import age, git, settings_for

hermetic_git = workspace_support.hermetic_git
project = workspace_support.project
web = workspace_support.web
workspaces = workspace_support.workspaces
common = git_view_support.common

pytestmark = [pytest.mark.anyio, pytest.mark.git]


async def started(view: GitView, cwd: Path) -> asyncio.subprocess.Process:
    """A shell in a sandbox showing ``view`` (as ``git_view_support.inside`` makes it), its
    mounts made, waiting for commands on its standard input."""
    proc = await asyncio.create_subprocess_exec(
        *sandbox_args(view, cwd), "sh", "-s",
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )  # fmt: skip
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(b"echo ready\n")
    await proc.stdin.drain()
    assert await asyncio.wait_for(proc.stdout.readline(), 60) == b"ready\n"
    return proc


async def finished(proc: asyncio.subprocess.Process, command: str) -> str:
    """What ``command`` said in the started sandbox, which then ends; it must succeed."""
    out, _ = await asyncio.wait_for(proc.communicate(f"{command}\n".encode()), 60)
    text = out.decode("utf-8", "replace")
    assert proc.returncode == 0, text
    return text


def placeholder_branches(repository: Path) -> list[str]:
    listed = git(repository, "for-each-ref", "--format=%(refname:short)", "refs/heads/harness/")
    return [name for name in listed.split() if name.startswith("harness/_")]


def worktrees(repository: Path) -> list[str]:
    listed = git(repository, "worktree", "list", "--porcelain")
    return [
        line.removeprefix("worktree ") for line in listed.splitlines() if line[:9] == "worktree "
    ]


# --- pure -------------------------------------------------------------------------------------


def test_a_placeholder_is_named_after_its_view_and_no_slug_can_take_it() -> None:
    view = Path("/w/.views/0123456789ab")
    assert placeholder(view) == "_0123456789ab"
    assert private_shown(view) == Path("/w/.sandbox/_0123456789ab")


def test_a_worktree_s_git_is_shown_at_the_paths_a_spare_s_is_at() -> None:
    git_view = GitView(
        (
            Bind("/w/t-1", "/w/t-1", True),
            Bind("/r/.git", "/r/.git", False),
            Bind("/r/.git/worktrees/t-1", "/r/.git/worktrees/t-1", True),
            Bind("/w/.sandbox/t-1/refs", "/r/.git/refs/heads/harness", True),
            Bind("/w/.sandbox/t-1/objects", "/w/.sandbox/t-1/objects", True),
        ),
        {
            "GIT_OBJECT_DIRECTORY": "/w/.sandbox/t-1/objects",
            "GIT_ALTERNATE_OBJECT_DIRECTORIES": "/r/.git/objects",
        },
    )

    shown = shown_in_view(
        git_view,
        Path("/w/t-1"),
        Path("/w/.sandbox/t-1"),
        Path("/w/.views/abc"),
        Path("/r/.git/worktrees/t-1"),
    )

    assert shown.binds == (
        Bind("/w/t-1", "/w/.views/abc", True),
        Bind("/r/.git", "/r/.git", False),
        Bind("/r/.git/worktrees/t-1", "/r/.git/worktrees/t-1", True),
        Bind("/w/.sandbox/t-1/refs", "/r/.git/refs/heads/harness", True),
        Bind("/w/.sandbox/t-1/objects", "/w/.sandbox/_abc/objects", True),
        Bind("/w/.views/abc.gitdir", "/r/.git/worktrees/t-1/gitdir", False),
    )
    assert shown.env == {
        "GIT_OBJECT_DIRECTORY": "/w/.sandbox/_abc/objects",
        "GIT_ALTERNATE_OBJECT_DIRECTORIES": "/r/.git/objects",
    }


def test_spares_are_made_in_the_default_repository_else_the_only_one_else_none() -> None:
    def repos(*names: str) -> dict[str, object]:
        return {name: object() for name in names}

    settings = WorkspaceSettings(repositories=repos("api", "web"), default="web")  # type: ignore[arg-type]
    assert default_repository(settings) == "web"
    only = WorkspaceSettings(repositories=repos("web"))  # type: ignore[arg-type]
    assert default_repository(only) == "web"
    assert default_repository(WorkspaceSettings(repositories=repos("api", "web"))) is None  # type: ignore[arg-type]
    assert default_repository(WorkspaceSettings()) is None


# --- made, adopted, dropped -------------------------------------------------------------------


async def test_a_spare_worktree_is_made_ahead_on_a_placeholder_branch(
    workspaces: Workspaces, web: Path
) -> None:
    view = await workspaces.sandbox_folders.spare_folder("web")

    assert view.parent == workspaces.root / VIEWS and (view / "src" / "app.py").is_file()
    assert git(view, "branch", "--show-current") == f"harness/{placeholder(view)}"
    assert git(view, "rev-parse", "HEAD") == git(web, "rev-parse", "main")
    assert git(view, "status", "--short") == ""
    assert (workspaces.root / SANDBOXES / placeholder(view) / "objects").is_dir()
    shown = workspaces.sandbox_folders.spare_git(view)
    assert shown is not None and shown.binds[0] == Bind(str(view), str(view), True)


async def test_a_new_task_adopts_the_spare_worktree_as_prepare_would_have_made_it(
    workspaces: Workspaces, web: Path, common: Path
) -> None:
    view = await workspaces.sandbox_folders.spare_folder("web")
    name = placeholder(view)
    spare_view = workspaces.sandbox_folders.spare_git(view)
    assert spare_view is not None
    sandbox = await started(spare_view, view)  # the spare's, started before its task came

    adopted = await workspaces.sandbox_folders.adopt_spare(view, "add-login")

    path = workspaces.root / "add-login"
    assert adopted is not None and adopted.path == path
    assert (adopted.repository, adopted.branch) == ("web", "harness/add-login")
    assert adopted.base_commit == git(web, "rev-parse", "main")
    assert view.is_symlink() and view.resolve() == path.resolve()
    assert git(path, "branch", "--show-current") == "harness/add-login"
    assert placeholder_branches(web) == []
    private = workspaces.root / SANDBOXES / "add-login"
    assert not (workspaces.root / SANDBOXES / name).exists()
    assert (private / "refs" / "add-login").is_file()
    assert str(path) in worktrees(web)
    assert await workspaces.find("add-login") == adopted
    # The sandbox started for the spare, still showing its old paths, works on the task's
    # branch; the harness settles its commit as any agent's.
    (view / "new.txt").write_text("new\n", encoding="utf-8")
    said = await finished(
        sandbox,
        "git add new.txt && git commit --quiet -m 'warm work' && git branch --show-current",
    )
    assert said == "harness/add-login\n"
    await workspaces.sandbox_git.settle_sandbox_view(adopted)
    assert git(web, "log", "-1", "--format=%s", "harness/add-login") == "warm work"
    report = await workspaces.report(adopted, commit=None, author="test")
    assert report is not None and report.branch == "harness/add-login"
    # A later run's view (a follow-up) opens as for any worktree.
    again = await workspaces.sandbox_git.sandbox_view(adopted)
    assert again is not None
    code, out = await inside(again, path, "git", "log", "-1", "--format=%s")
    assert (code, out) == (0, "warm work\n")


async def test_a_spare_made_before_the_base_moved_or_for_a_task_with_a_folder_does_not_fit(
    workspaces: Workspaces, web: Path
) -> None:
    view = await workspaces.sandbox_folders.spare_folder("web")
    await workspaces.prepare("has-one", None)
    assert await workspaces.sandbox_folders.adopt_spare(view, "has-one") is None
    (web / "more.txt").write_text("more\n", encoding="utf-8")
    git(web, "add", "more.txt")
    git(web, "commit", "--quiet", "-m", "moved on")

    assert await workspaces.sandbox_folders.adopt_spare(view, "late") is None

    assert not (workspaces.root / "late").exists()
    await workspaces.sandbox_folders.drop_view(view)
    assert placeholder_branches(web) == [] and not view.exists()
    assert [p for p in (workspaces.root / SANDBOXES).iterdir()] == []
    assert all(".views" not in tree for tree in worktrees(web))


async def test_a_spare_whose_repository_went_is_not_taken_and_the_task_is_told_why(
    workspaces: Workspaces, web: Path, tmp_path: Path
) -> None:
    view = await workspaces.sandbox_folders.spare_folder("web")
    web.rename(tmp_path / "web-moved")

    taken = await workspaces.sandbox_folders.adopt_spare(view, "add-login")
    with pytest.raises(WorkspaceError, match="does not exist") as cold:
        await workspaces.prepare("add-login", "web")  # the cold start that follows

    assert taken is None and not (workspaces.root / "add-login").exists()
    assert "workspaces.repositories.web.path" in cold.value.fix


async def test_prune_removes_what_a_crashed_harness_s_spares_left(project: Path, web: Path) -> None:
    crashed = Workspaces(settings_for(project, web={"path": str(web)}))
    folders = crashed.sandbox_folders
    old, young = await folders.spare_folder("web"), await folders.spare_folder("web")
    for path in (old, crashed.root / SANDBOXES / placeholder(old)):
        age(path, 30)
    later = Workspaces(settings_for(project, web={"path": str(web)}))  # after a restart

    await later.prune(timedelta(days=7))

    assert placeholder_branches(web) == [f"harness/{placeholder(young)}"]
    assert not old.exists() and young.is_dir()
    private = sorted(p.name for p in (later.root / SANDBOXES).iterdir())
    assert private == [placeholder(young)]
    assert str(old) not in worktrees(web)
    assert not (Path(git(web, "rev-parse", "--absolute-git-dir")) / "worktrees" / old.name).exists()


async def test_dropping_a_spare_keeps_the_folder_running_sandboxes_show_their_branch_in(
    workspaces: Workspaces, web: Path
) -> None:
    task = await workspaces.prepare("add-login", "web")
    git(web, "pack-refs", "--all")  # no loose task branch left under refs/heads/harness
    shown = await workspaces.sandbox_git.sandbox_view(task)
    assert shown is not None
    sandbox = await started(shown, task.path)
    # Its branch the only loose one there.
    view = await workspaces.sandbox_folders.spare_folder("web")

    await workspaces.sandbox_folders.drop_view(view)

    (task.path / "x.txt").write_text("x\n", encoding="utf-8")
    said = await finished(
        sandbox, "git add x.txt && git commit --quiet -m 'cold work' && git branch --show-current"
    )
    assert said == "harness/add-login\n"
    await workspaces.sandbox_git.settle_sandbox_view(task)
    assert git(web, "log", "-1", "--format=%s", "harness/add-login") == "cold work"
    assert placeholder_branches(web) == []


async def test_a_spare_whose_folder_was_pruned_while_it_waited_does_not_fit_and_goes(
    workspaces: Workspaces, web: Path
) -> None:
    view = await workspaces.sandbox_folders.spare_folder("web")
    shutil.rmtree(view)  # `workspaces prune` while it waited a long time

    assert await workspaces.sandbox_folders.adopt_spare(view, "late") is None

    await workspaces.sandbox_folders.drop_view(view)
    assert placeholder_branches(web) == [] and all(".views" not in w for w in worktrees(web))
    assert list((workspaces.root / SANDBOXES).iterdir()) == []
    admin = Path(git(web, "rev-parse", "--absolute-git-dir")) / "worktrees" / view.name
    assert not admin.exists()
    assert (await workspaces.prepare("late", "web")).branch == "harness/late"  # cold, as ever
