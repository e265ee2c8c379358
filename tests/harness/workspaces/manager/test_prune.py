"""Workspaces listed and pruned: idle ones removed by the clock and the configured age, their
work saved first, what holds commits or is in use kept."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from harness.clock import file_stamp
from harness.testing.clock import FakeClock
from harness.workspaces.manager import Workspaces
from tests.harness.workspaces.workspace_support import DAY, age, git, settings_for

pytestmark = [pytest.mark.anyio, pytest.mark.git]


async def test_list_shows_each_workspace_with_repository_branch_and_uncommitted_work(
    workspaces: Workspaces,
) -> None:
    clean = await workspaces.prepare("add-login", "web")
    dirty = await workspaces.prepare("fix-footer", "web")
    scratch = await workspaces.prepare("write-a-poem", None)
    (dirty.path / "footer.html").write_text("<footer/>\n", encoding="utf-8")
    age(clean.path, 3)

    listed = {info.slug: info for info in await workspaces.list()}

    assert sorted(listed) == ["add-login", "fix-footer", "write-a-poem"]
    assert listed["add-login"].kind == "worktree"
    assert listed["add-login"].repository == "web"
    assert listed["add-login"].branch == "harness/add-login"
    assert listed["add-login"].uncommitted is False
    assert listed["fix-footer"].uncommitted is True
    assert listed["write-a-poem"].kind == "scratch"
    assert listed["write-a-poem"].path == scratch.path
    assert listed["write-a-poem"].repository is None
    assert listed["add-login"].modified < listed["fix-footer"].modified - timedelta(days=2)


async def test_prune_keeps_a_fresh_workspace_removes_an_old_clean_one_and_saves_old_work(
    workspaces: Workspaces, web: Path, tmp_path: Path
) -> None:
    fresh = await workspaces.prepare("fresh-task", "web")
    clean = await workspaces.prepare("old-clean", "web")
    dirty = await workspaces.prepare("old-dirty", "web")
    (dirty.path / "README.md").write_text("web, edited\n", encoding="utf-8")
    (dirty.path / "draft.txt").write_text("an untracked draft\n", encoding="utf-8")
    (dirty.path / "logo.bin").write_bytes(bytes(range(256)))
    age(clean.path, 20)
    age(dirty.path, 20)

    report = await workspaces.prune(timedelta(days=14))

    assert [(k.slug, k.reason) for k in report.kept] == [("fresh-task", "recent")]
    assert [r.slug for r in report.removed] == ["old-clean", "old-dirty"]
    assert report.removed[0].patch is None
    patch = report.removed[1].patch
    assert patch is not None and report.patches == (patch,)
    assert patch.parent == workspaces.root / ".patches"
    assert patch.name.startswith("old-dirty-") and patch.suffix == ".patch"
    assert fresh.path.is_dir() and not clean.path.exists() and not dirty.path.exists()
    listed = git(web, "worktree", "list", "--porcelain")
    assert str(fresh.path) in listed and str(dirty.path) not in listed
    # The branches stay; the patch re-applies the uncommitted work on the kept branch.
    assert git(web, "branch", "--list", "harness/old-*").split() == [
        "harness/old-clean",
        "harness/old-dirty",
    ]
    copy = tmp_path / "restored"
    git(web, "worktree", "add", "--quiet", str(copy), "harness/old-dirty")
    git(copy, "apply", str(patch))
    assert (copy / "README.md").read_text(encoding="utf-8") == "web, edited\n"
    assert (copy / "draft.txt").read_text(encoding="utf-8") == "an untracked draft\n"
    assert (copy / "logo.bin").read_bytes() == bytes(range(256))


async def test_prune_by_default_uses_the_configured_age_and_spares_tasks_in_use(
    project: Path, web: Path
) -> None:
    settings = replace(settings_for(project, web={"path": str(web)}), prune_after_days=30)
    workspaces = Workspaces(settings)
    young = await workspaces.prepare("twenty-days", "web")
    old = await workspaces.prepare("forty-days", "web")
    busy = await workspaces.prepare("busy", None)
    for path, days in ((young.path, 20), (old.path, 40), (busy.path, 40)):
        age(path, days)

    report = await workspaces.prune(keep={"busy"})

    assert [r.slug for r in report.removed] == ["forty-days"]
    assert sorted((k.slug, k.reason) for k in report.kept) == [
        ("busy", "in use"),
        ("twenty-days", "recent"),
    ]


async def test_prune_measures_idleness_by_the_clock_and_stamps_the_patches_with_it(
    project: Path, web: Path
) -> None:
    clock = FakeClock(datetime.now(UTC))  # the files' times are real ones
    workspaces = Workspaces(settings_for(project, web={"path": str(web)}), clock)
    idle = await workspaces.prepare("idle-task", "web")
    (idle.path / "draft.txt").write_text("unsaved\n", encoding="utf-8")

    report = await workspaces.prune(timedelta(days=14))
    assert [(k.slug, k.reason) for k in report.kept] == [("idle-task", "recent")]

    clock.advance(15 * DAY)  # nothing on disk changes: only the clock moves
    report = await workspaces.prune(timedelta(days=14))
    assert [r.slug for r in report.removed] == ["idle-task"]
    patch = report.removed[0].patch
    assert patch is not None and patch.name == f"idle-task-{file_stamp(clock.now())}.patch"
    assert not idle.path.exists()


async def test_prune_saves_the_files_of_an_old_scratch_folder_before_removing_it(
    workspaces: Workspaces, tmp_path: Path
) -> None:
    scratch = await workspaces.prepare("write-a-poem", None)
    (scratch.path / "poems").mkdir()
    (scratch.path / "poems" / "one.txt").write_text("roses\n", encoding="utf-8")
    empty = await workspaces.prepare("nothing-here", None)
    age(scratch.path, 20)
    age(empty.path, 20)

    report = await workspaces.prune(timedelta(days=14))

    assert [(r.slug, r.patch is not None) for r in report.removed] == [
        ("nothing-here", False),
        ("write-a-poem", True),
    ]
    assert not scratch.path.exists()
    restored = tmp_path / "restored"
    restored.mkdir()
    patch = report.removed[1].patch
    assert patch is not None
    git(restored, "apply", str(patch))
    assert (restored / "poems" / "one.txt").read_text(encoding="utf-8") == "roses\n"


async def test_prune_keeps_a_scratch_folder_whose_own_repository_has_commits(
    workspaces: Workspaces,
) -> None:
    scratch = await workspaces.prepare("keeps-history", None)
    (scratch.path / "notes.txt").write_text("v1\n", encoding="utf-8")
    git(scratch.path, "add", "-A")
    git(scratch.path, "-c", "user.name=a", "-c", "user.email=a@x", "commit", "-qm", "v1")
    age(scratch.path, 20)

    report = await workspaces.prune(timedelta(days=14))

    assert report.removed == ()
    [kept] = report.kept
    assert (kept.slug, kept.reason) == ("keeps-history", "failed")
    assert "a git repository with commits" in kept.detail
    assert (scratch.path / "notes.txt").exists()


async def test_prune_keeps_a_worktree_whose_detached_head_holds_commits_no_branch_has(
    workspaces: Workspaces,
) -> None:
    workspace = await workspaces.prepare("add-login", "web")
    git(workspace.path, "switch", "--quiet", "--detach")
    (workspace.path / "login.py").write_text("x = 1\n", encoding="utf-8")
    git(workspace.path, "add", "login.py")
    git(workspace.path, "commit", "--quiet", "-m", "on no branch")
    age(workspace.path, 20)

    report = await workspaces.prune(timedelta(days=14))

    assert report.removed == ()
    (kept,) = report.kept
    assert (kept.slug, kept.reason) == ("add-login", "failed")
    assert "detached HEAD with commits no branch holds" in kept.detail
    assert (workspace.path / "login.py").is_file()


async def test_a_pruned_task_prepared_again_continues_its_branch_from_the_same_base(
    workspaces: Workspaces, web: Path
) -> None:
    first = await workspaces.prepare("add-login", "web")
    (first.path / "login.py").write_text("x = 1\n", encoding="utf-8")
    git(first.path, "add", "login.py")
    git(first.path, "commit", "--quiet", "-m", "login")
    age(first.path, 20)
    await workspaces.prune(timedelta(days=14))
    (web / "later.txt").write_text("main moved on\n", encoding="utf-8")
    git(web, "add", "later.txt")
    git(web, "commit", "--quiet", "-m", "later")

    again = await workspaces.prepare("add-login", "web")

    assert again.base_commit == first.base_commit
    assert (again.path / "login.py").is_file()
    changes = await workspaces.changes(again)
    assert changes is not None
    assert [change.path for change in changes.files] == ["login.py"]


async def test_prune_takes_what_a_crashed_runs_cli_left_with_the_workspace(
    workspaces: Workspaces,
) -> None:
    old = await workspaces.prepare("old-task", None)
    young = await workspaces.prepare("young-task", None)
    for slug in ("old-task", "young-task"):  # a harness killed mid-run leaves these
        transcript = workspaces.cli_state(slug, "a0000000001") / "projects" / "x.jsonl"
        transcript.parent.mkdir(parents=True)
        transcript.write_text("{}\n", encoding="utf-8")
    age(old.path, 20)

    await workspaces.prune(timedelta(days=14))

    assert not old.path.exists() and not workspaces.cli_state("old-task").exists()
    assert young.path.exists() and workspaces.cli_state("young-task").exists()
