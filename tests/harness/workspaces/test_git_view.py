"""An agent's git inside a real bubblewrap sandbox: its worktree's view of the repository
(``git_view``), against real repositories in temp folders: its work put on its branch, nothing
else of the repository written, and the workspaces giving views."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from harness.workspaces.git_view import open_view
from harness.workspaces.manager import Workspace, Workspaces
from tests.harness.workspaces import git_view_support, workspace_support
from tests.harness.workspaces.git_view_support import (
    MOUNTS,
    closed,
    commit_file,
    fsck,
    inside,
    ok,
    opened,
    private_of,
    snapshot,
)
from tests.harness.workspaces.workspace_support import age, git

# The repository, the harness's checkout and their workspaces, as workspace_support makes them.
hermetic_git = workspace_support.hermetic_git
project = workspace_support.project
web = workspace_support.web
workspaces = workspace_support.workspaces
task = git_view_support.task
common = git_view_support.common

pytestmark = [pytest.mark.anyio, pytest.mark.git]


# --- an agent's work ------------------------------------------------------------------------


async def test_an_agent_commits_in_its_view_and_closing_puts_the_commit_on_its_branch(
    workspaces: Workspaces, task: Workspace, common: Path, web: Path
) -> None:
    view = await opened(workspaces, task, common)
    await commit_file(view, task.path, "login.py", "def login(): ...\n", "login")
    inner = (await ok(view, task.path, "git", "rev-parse", "HEAD")).strip()
    status = await ok(view, task.path, "git", "status", "--porcelain")
    log = await ok(view, task.path, "git", "log", "--format=%s")
    assert status == "" and log.split() == ["login", "initial"]
    assert git(web, "rev-parse", "harness/add-login") == task.base_commit  # not yet

    moved = await closed(workspaces, task, common)

    assert moved == inner == git(web, "rev-parse", "harness/add-login")
    assert git(web, "show", "harness/add-login:login.py") == "def login(): ..."
    assert fsck(common) == ""
    assert git(task.path, "status", "--porcelain") == ""  # the harness's git sees it too
    assert (await workspaces.changes(task)) is not None


async def test_nothing_the_agent_runs_in_its_view_writes_the_repository(
    workspaces: Workspaces, task: Workspace, common: Path, web: Path
) -> None:
    view = await opened(workspaces, task, common)
    admin = Path(task.git_dir or "")
    before = snapshot(common, admin)
    main = git(web, "rev-parse", "main")
    some_object = next(p for p in (common / "objects").rglob("*") if p.is_file())
    attempts = {
        "move main": ["git", "update-ref", "refs/heads/main", "HEAD"],
        "make a branch": ["git", "branch", "elsewhere"],
        "tag": ["git", "tag", "v1"],
        "configure": ["git", "config", "core.hooksPath", "/tmp"],
        "pack refs": ["git", "pack-refs", "--all"],
        "gc": ["git", "gc", "--quiet"],
        "plant a hook": ["sh", "-c", f"echo 'touch /x' > {common}/hooks/pre-commit"],
        "write config": ["sh", "-c", f"echo '[core]fsmonitor=/x' >> {common}/config"],
        "overwrite an object": ["sh", "-c", f"chmod u+w {some_object}; : > {some_object}"],
        "remove an object": ["rm", "-f", str(some_object)],
        "write packed-refs": ["sh", "-c", f"echo x > {common}/packed-refs"],
        "write another worktree": ["sh", "-c", f"echo x > {common}/worktrees/x"],
    }

    results = {what: await inside(view, task.path, *command) for what, command in attempts.items()}

    succeeded = {what: out for what, (code, out) in results.items() if code == 0}
    assert succeeded == {}
    assert all("Read-only file system" in out for _, out in results.values()), results
    assert snapshot(common, admin) == before
    assert git(web, "rev-parse", "main") == main
    assert await closed(workspaces, task, common) is None


async def test_another_task_s_branch_is_not_in_the_view_and_stays_as_it_is(
    workspaces: Workspaces, task: Workspace, common: Path, web: Path
) -> None:
    other = await workspaces.prepare("fix-footer", "web")
    (other.path / "footer.html").write_text("<footer/>\n", encoding="utf-8")
    git(other.path, "add", "footer.html")
    git(other.path, "commit", "--quiet", "-m", "footer")
    theirs = git(web, "rev-parse", "harness/fix-footer")
    view = await opened(workspaces, task, common)

    listed = await ok(view, task.path, "git", "branch", "--list", "--format=%(refname:short)")
    worktrees = await ok(view, task.path, "git", "worktree", "list", "--porcelain")
    # What the agent writes at the other branch's name is its own copy, never that branch.
    await ok(view, task.path, "git", "update-ref", "refs/heads/harness/fix-footer", "HEAD")
    other_head, _ = await inside(
        view, task.path, "sh", "-c", f"echo 'ref: refs/heads/main' > {other.git_dir}/HEAD"
    )

    assert listed.split() == ["harness/add-login", "main"]
    assert "fix-footer" not in worktrees and f"worktree {task.path}" in worktrees
    assert other_head != 0
    assert await closed(workspaces, task, common) is None
    assert git(web, "rev-parse", "harness/fix-footer") == theirs
    assert git(other.path, "symbolic-ref", "HEAD") == "refs/heads/harness/fix-footer"


async def test_with_packed_refs_the_agent_still_sees_no_other_branch_and_deletes_none(
    workspaces: Workspaces, task: Workspace, common: Path, web: Path
) -> None:
    await workspaces.prepare("fix-footer", "web")
    git(web, "pack-refs", "--all")
    view = await opened(workspaces, task, common)
    (task.path / "login.py").write_text("x = 1\n", encoding="utf-8")

    listed = await ok(view, task.path, "git", "branch", "--list", "--format=%(refname:short)")
    deleted, _ = await inside(view, task.path, "git", "branch", "-D", "harness/fix-footer")
    await ok(view, task.path, "git", "add", "login.py")
    await ok(view, task.path, "git", "commit", "--quiet", "-m", "login")

    assert listed.split() == ["harness/add-login", "main"] and deleted != 0
    moved = await closed(workspaces, task, common)
    assert moved == git(web, "rev-parse", "harness/add-login")
    assert git(web, "rev-parse", "harness/fix-footer") == task.base_commit
    assert fsck(common) == ""


async def test_work_added_but_not_committed_in_the_view_is_committed_by_the_harness_after(
    workspaces: Workspaces, task: Workspace, common: Path, web: Path
) -> None:
    view = await opened(workspaces, task, common)
    (task.path / "login.py").write_text("def login(): ...\n", encoding="utf-8")
    (task.path / "README.md").write_text("web, with login\n", encoding="utf-8")
    await ok(view, task.path, "git", "add", "login.py", "README.md")

    assert await closed(workspaces, task, common) is None
    report = await workspaces.report(task, commit="developer a1: login", author="harness dev")

    assert report is not None and "login.py" in report.diff_stat
    assert git(web, "show", "harness/add-login:login.py") == "def login(): ..."
    assert git(web, "log", "-1", "--format=%s", "harness/add-login") == "developer a1: login"
    assert fsck(common) == ""


@pytest.mark.parametrize(
    ("local", "where"),
    [(True, "harness/tasks/add-login/pack"), (False, "objects/pack")],
)
async def test_objects_the_agent_packed_in_its_view_are_brought_in_as_a_pack(
    workspaces: Workspaces, task: Workspace, common: Path, web: Path, local: bool, where: str
) -> None:
    view = await opened(workspaces, task, common)
    await commit_file(view, task.path, "login.py", "def login(): ...\n", "login")
    # Without -l the pack holds the repository's own loose objects too.
    await ok(view, task.path, "git", "repack", "-d", "-q", *(["-l"] if local else []))
    packs = sorted(p.name for p in (private_of(workspaces, task) / "objects/pack").iterdir())
    assert [p.rsplit(".", 1)[1] for p in packs if p.startswith("pack-")][:2] == ["idx", "pack"]

    moved = await closed(workspaces, task, common)

    assert moved == git(web, "rev-parse", "harness/add-login")
    # Into the task's own store, which the repository reaches and no other task is shown;
    # but a pack holding objects of the repository's own store goes there, beside them
    # (a store holding them would make `git gc` drop them from the repository's own).
    target = {p.name for p in (common / where).iterdir()}
    assert {p for p in packs if p.endswith((".idx", ".pack"))} <= target
    assert not [p for p in target if p.startswith("tmp_")]
    assert fsck(common) == ""
    git(web, "gc", "--quiet")
    assert git(web, "show", "harness/add-login:login.py") == "def login(): ..."
    assert fsck(common) == ""


async def test_closing_twice_is_harmless_and_the_next_run_commits_on_top(
    workspaces: Workspaces, task: Workspace, common: Path, web: Path
) -> None:
    view = await opened(workspaces, task, common)
    await commit_file(view, task.path, "one.txt", "1\n", "one")
    first = await closed(workspaces, task, common)
    assert await closed(workspaces, task, common) is None
    # The harness commits outside between runs: settling the old view again changes nothing.
    (task.path / "notes.txt").write_text("by the harness\n", encoding="utf-8")
    by_harness = await workspaces.commit(task, "harness: notes", author="harness dev")
    assert await closed(workspaces, task, common) is None
    assert git(web, "rev-parse", "harness/add-login") == by_harness

    view = await opened(workspaces, task, common)
    await commit_file(view, task.path, "two.txt", "2\n", "two")
    await ok(view, task.path, "git", "commit", "--quiet", "--amend", "-m", "two, amended")
    second = await closed(workspaces, task, common)

    assert git(web, "log", "--format=%s", "harness/add-login").splitlines() == [
        "two, amended",
        "harness: notes",
        "one",
        "initial",
    ]
    assert first is not None and second == git(web, "rev-parse", "harness/add-login")
    assert fsck(common) == ""


async def test_a_reset_in_the_view_moves_the_branch_back(
    workspaces: Workspaces, task: Workspace, common: Path, web: Path
) -> None:
    view = await opened(workspaces, task, common)
    await commit_file(view, task.path, "one.txt", "1\n", "one")
    await closed(workspaces, task, common)
    view = await opened(workspaces, task, common)

    await ok(view, task.path, "git", "reset", "--quiet", "--hard", "HEAD~1")

    assert await closed(workspaces, task, common) == task.base_commit
    assert git(web, "rev-parse", "harness/add-login") == task.base_commit


async def test_a_writer_s_unsettled_commit_is_settled_when_its_view_opens_again(
    workspaces: Workspaces, task: Workspace, common: Path, web: Path
) -> None:
    view = await opened(workspaces, task, common)
    await commit_file(view, task.path, "one.txt", "1\n", "one")
    made = (await ok(view, task.path, "git", "rev-parse", "HEAD")).strip()

    await opened(workspaces, task, common)  # the harness stopped before closing the first

    assert git(web, "rev-parse", "harness/add-login") == made


async def test_a_reader_s_view_reads_the_writer_s_commits_and_writes_nothing(
    workspaces: Workspaces, task: Workspace, common: Path
) -> None:
    writer = await opened(workspaces, task, common)
    await commit_file(writer, task.path, "one.txt", "1\n", "one")
    private = private_of(workspaces, task)
    before = snapshot(private), snapshot(task.path), snapshot(Path(task.git_dir or ""))

    reader = await open_view(task, common, private, writes=False)
    log = await ok(reader, task.path, "git", "log", "--format=%s")
    status = await ok(reader, task.path, "git", "status", "--porcelain")
    shown = await ok(reader, task.path, "git", "show", "HEAD:one.txt")
    committed, _ = await inside(reader, task.path, "git", "commit", "--allow-empty", "-m", "x")
    wrote, _ = await inside(reader, task.path, "sh", "-c", "echo x > new.txt")

    assert log.split() == ["one", "initial"] and status == "" and shown == "1\n"
    assert [b.writable for b in reader.binds] == [False] * len(reader.binds)
    assert committed != 0 and wrote != 0
    after = snapshot(private), snapshot(task.path), snapshot(Path(task.git_dir or ""))
    assert after == before


# --- through the workspaces -----------------------------------------------------------------


async def test_workspaces_give_a_view_to_a_worktree_and_none_to_a_scratch_folder(
    workspaces: Workspaces, task: Workspace, common: Path, web: Path
) -> None:
    scratch = await workspaces.prepare("write-a-poem", None)

    view = await workspaces.sandbox_git.sandbox_view(task)

    assert await workspaces.sandbox_git.sandbox_view(scratch) is None
    await workspaces.sandbox_git.settle_sandbox_view(scratch)
    assert view is not None
    private, admin = private_of(workspaces, task), Path(task.git_dir or "")
    assert [(Path(b.source), Path(b.target), b.writable) for b in view.binds] == [
        (task.path, task.path, True),
        (private / "common", common, False),
        *((common / name, common / name, False) for name in ("objects", "refs", "logs", "hooks")),
        (common / "harness/tasks" / task.slug, common / "harness/task", False),
        (admin, common / "worktrees" / admin.name, True),
        (private / "refs", common / "refs/heads/harness", True),
        (private / "logs", common / "logs/refs/heads/harness", True),
        (private / "objects", private / "objects", True),
    ]
    assert view.env == {
        "GIT_OBJECT_DIRECTORY": str(private_of(workspaces, task) / "objects"),
        "GIT_ALTERNATE_OBJECT_DIRECTORIES": str(common / "objects"),
    }
    await commit_file(view, task.path, "login.py", "x = 1\n", "login")
    await workspaces.sandbox_git.settle_sandbox_view(task)
    assert git(web, "log", "-1", "--format=%s", "harness/add-login") == "login"


async def test_the_sandbox_folder_is_not_a_workspace_and_goes_when_its_task_s_is_pruned(
    workspaces: Workspaces, task: Workspace
) -> None:
    kept = await workspaces.prepare("fix-footer", "web")
    for workspace in (task, kept):
        await workspaces.sandbox_git.sandbox_view(workspace)
    age(task.path, 20)

    listed = [info.slug for info in await workspaces.list()]
    report = await workspaces.prune(timedelta(days=14))

    assert listed == ["add-login", "fix-footer"]
    assert [r.slug for r in report.removed] == ["add-login"]
    assert not private_of(workspaces, task).exists()
    assert private_of(workspaces, kept).is_dir()


async def test_a_url_repository_s_bare_cache_works_the_same(
    project: Path, web: Path, tmp_path: Path
) -> None:
    origin = tmp_path / "origin.git"
    git(tmp_path, "clone", "--quiet", "--bare", str(web), str(origin))
    workspaces = Workspaces(workspace_support.settings_for(project, api={"url": origin.as_uri()}))
    task = await workspaces.prepare("add-login", "api")
    cache = workspaces.settings.repositories["api"].cache
    assert cache is not None
    before = snapshot(cache, Path(task.git_dir or ""))

    view = await workspaces.sandbox_git.sandbox_view(task)
    assert view is not None
    await commit_file(view, task.path, "login.py", "x = 1\n", "login")
    moved, _ = await inside(view, task.path, "git", "update-ref", "refs/remotes/origin/x", "HEAD")
    # Nothing in the cache changed but the mount points and the harness's own folder (the
    # tasks' stores, which the cache reaches through the pool, an alternate of its objects),
    # made before the agent ran.
    after = snapshot(cache, Path(task.git_dir or ""))
    assert {path: after.get(path) for path in before} == before
    added = {path for path in set(after) - set(before) if path.split("/")[0] != "harness"}
    assert added <= {"logs", "logs/refs", "logs/refs/heads", *MOUNTS, "objects/info/alternates"}
    assert (cache / "objects/info/alternates").read_text() == "../harness/objects\n"
    await workspaces.sandbox_git.settle_sandbox_view(task)

    assert moved != 0
    assert git(cache, "log", "-1", "--format=%s", "harness/add-login") == "login"
    assert git(cache, "rev-parse", "origin/main") == git(web, "rev-parse", "main")
    assert fsck(cache) == ""
