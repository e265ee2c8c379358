"""Workspaces against real git repositories in temp folders (no network: a `url` repository
is a local bare repository reached through a file:// URL)."""

from __future__ import annotations

import asyncio
import os
import subprocess
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from harness.clock import file_stamp
from harness.config.settings import RepositorySettings, WorkspaceSettings, parse_config
from harness.git import git_env
from harness.testing.clock import FakeClock
from harness.workspaces.manager import (
    FileChange,
    GitError,
    RepositoryChoice,
    Workspace,
    WorkspaceError,
    Workspaces,
    choose_repository,
)

pytestmark = [pytest.mark.anyio, pytest.mark.git]

DAY = 24 * 3600


@pytest.fixture(autouse=True)
def hermetic_git(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """git reads no config of this machine's user or system; commits get a test identity."""
    config = tmp_path / "gitconfig"
    config.write_text(
        "[user]\n\tname = Test\n\temail = test@example.com\n"
        "[init]\n\tdefaultBranch = main\n[commit]\n\tgpgsign = false\n",
        encoding="utf-8",
    )
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(config))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")


def git(cwd: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", *args], cwd=cwd, check=True, capture_output=True, text=True, timeout=60
    )
    return done.stdout.strip()


def make_repo(folder: Path, files: dict[str, str]) -> Path:
    folder.mkdir(parents=True)
    git(folder, "init", "--quiet", "--initial-branch=main")
    for name, text in files.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(text, encoding="utf-8")
    git(folder, "add", "--all")
    git(folder, "commit", "--quiet", "-m", "initial")
    return folder


def age(path: Path, days: float) -> None:
    """Make the folder and everything in it look untouched for ``days``."""
    when = os.stat(path).st_mtime - days * DAY
    for folder, _, files in os.walk(path):
        for name in [*files, ""]:
            os.utime(os.path.join(folder, name), (when, when), follow_symlinks=False)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """The harness's own checkout: a git repository holding config.yaml."""
    return make_repo(
        tmp_path / "harness",
        {"config.yaml": "# harness\n", ".gitignore": ".agents/\n", "README.md": "harness\n"},
    )


@pytest.fixture
def web(tmp_path: Path) -> Path:
    return make_repo(
        tmp_path / "web",
        {"README.md": "web\n", "src/app.py": "print('hello')\n", "src/util.py": "X = 1\n"},
    )


def settings_for(project: Path, **repositories: dict[str, Any]) -> WorkspaceSettings:
    config = parse_config(
        {"workspaces": {"repositories": repositories}}, file=project / "config.yaml"
    )
    return config.workspaces


@pytest.fixture
def workspaces(project: Path, web: Path) -> Workspaces:
    return Workspaces(settings_for(project, web={"path": str(web)}))


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


# --- which repository a message is about ---------------------------------------------------

TWO = WorkspaceSettings(
    root=Path("/w"),
    default=None,
    channels={"C0123ABCD": "api"},
    repositories={
        "api": RepositorySettings("api", url="https://git.example.com/api.git"),
        "web": RepositorySettings("web", path=Path("/src/web")),
    },
)
WITH_DEFAULT = replace(TWO, default="web")
ONE = replace(TWO, channels={}, repositories={"web": TWO.repositories["web"]})
NONE = WorkspaceSettings(root=Path("/w"))


@pytest.mark.parametrize(
    ("settings", "text", "channel", "status", "repository", "source", "rest"),
    [
        (TWO, "repo:web fix the login", None, "chosen", "web", "message", "fix the login"),
        (TWO, "fix repo:web the login", None, "chosen", "web", "message", "fix the login"),
        (TWO, "fix it in repo:WEB.", "C0123ABCD", "chosen", "web", "message", "fix it in."),
        (TWO, "review\nrepo:api this", None, "chosen", "api", "message", "review\nthis"),
        (TWO, "fix the login", "C0123ABCD", "chosen", "api", "channel", "fix the login"),
        (WITH_DEFAULT, "fix the login", "C9", "chosen", "web", "default", "fix the login"),
        (ONE, "fix the login", None, "chosen", "web", "only", "fix the login"),
        (TWO, "fix the login", "C9", "ambiguous", None, None, "fix the login"),
        (TWO, "fix the login", None, "ambiguous", None, None, "fix the login"),
        (TWO, "repo:wbe fix it", None, "unknown", None, None, "fix it"),
        (NONE, "write a poem", "C0123ABCD", "none", None, None, "write a poem"),
        (NONE, "repo:web write", None, "unknown", None, None, "write"),
        (WITH_DEFAULT, "see x/repo:api, myrepo:api", None, "chosen", "web", "default",
         "see x/repo:api, myrepo:api"),
    ],
)  # fmt: skip
def test_choose_repository(
    settings: WorkspaceSettings,
    text: str,
    channel: str | None,
    status: str,
    repository: str | None,
    source: str | None,
    rest: str,
) -> None:
    choice = choose_repository(settings, text, channel)

    assert (choice.status, choice.repository, choice.source, choice.text) == (
        status,
        repository,
        source,
        rest,
    )


def test_an_ambiguous_choice_lists_the_candidates_and_an_unknown_one_the_known_names() -> None:
    assert choose_repository(TWO, "fix it", None) == RepositoryChoice(
        "ambiguous", "fix it", candidates=("api", "web")
    )
    assert choose_repository(TWO, "repo:api repo:web fix", None) == RepositoryChoice(
        "ambiguous", "fix", source="message", candidates=("api", "web")
    )
    assert choose_repository(TWO, "repo:Wbe fix", None) == RepositoryChoice(
        "unknown", "fix", candidates=("api", "web"), requested="wbe"
    )
    assert choose_repository(NONE, "repo:web fix", None) == RepositoryChoice(
        "unknown", "fix", requested="web"
    )


def test_a_choice_that_needs_the_person_explains_what_to_write() -> None:
    ambiguous = choose_repository(TWO, "fix the login", None)
    unknown = choose_repository(TWO, "repo:wbe fix", None)

    assert ambiguous.explain() == "Which repository is this about? Add one of: repo:api, repo:web."
    assert (
        unknown.explain() == "No repository 'wbe'. Did you mean 'web'? Known: repo:api, repo:web."
    )
    assert choose_repository(TWO, "repo:web fix", None).explain() is None


# --- the harness's own git is not the agent's ------------------------------------------------


async def prepared(project: Path, web: Path) -> tuple[Workspaces, Workspace]:
    workspaces = Workspaces(settings_for(project, web={"path": str(web)}))
    return workspaces, await workspaces.prepare("fix-it", "web")


async def test_a_deleted_git_link_never_sends_the_harness_to_the_enclosing_checkout(
    project: Path, web: Path, tmp_path: Path
) -> None:
    # The workspaces live inside a checkout that does not ignore them (the operator's app):
    # an agent that deletes its worktree's .git must not get the harness to commit its files
    # into that checkout.
    enclosing = make_repo(tmp_path / "app", {"README.md": "app\n"})
    settings = replace(settings_for(project, web={"path": str(web)}), root=enclosing / "ws")
    workspaces = Workspaces(settings)
    workspace = await workspaces.prepare("fix-it", "web")
    (workspace.path / ".git").unlink()
    (workspace.path / "evil.txt").write_text("planted\n", encoding="utf-8")
    before = git(enclosing, "rev-parse", "HEAD")

    with pytest.raises(WorkspaceError):
        await workspaces.report(workspace, commit="developer a1: done", author="harness dev")

    assert git(enclosing, "rev-parse", "HEAD") == before
    assert "evil.txt" not in git(enclosing, "ls-files")


async def test_hooks_and_fsmonitor_an_agent_configures_never_run_in_the_harness_s_git(
    project: Path, web: Path, tmp_path: Path
) -> None:
    workspaces, workspace = await prepared(project, web)
    marker = tmp_path / "ran"
    script = tmp_path / "payload.sh"
    script.write_text(f"#!/bin/sh\ntouch {marker}\n", encoding="utf-8")
    script.chmod(0o755)
    # What an agent can write: the repository's config and hooks (its worktree's git dir
    # shares them), with a monitor and a hook that would run the payload.
    git(workspace.path, "config", "core.fsmonitor", str(script))
    hooks = Path(git(workspace.path, "rev-parse", "--git-common-dir"))
    if not hooks.is_absolute():
        hooks = workspace.path / hooks
    (hooks / "hooks" / "pre-commit").write_text(f"#!/bin/sh\ntouch {marker}\n", encoding="utf-8")
    (hooks / "hooks" / "pre-commit").chmod(0o755)
    (workspace.path / "src" / "app.py").write_text("print('changed')\n", encoding="utf-8")

    report = await workspaces.report(workspace, commit="developer a1: done", author="harness dev")

    assert not marker.exists()
    assert report is not None and "src/app.py" in report.diff_stat
    status = git(workspace.path, "-c", "core.fsmonitor=false", "status", "--porcelain")
    assert status == ""  # committed, with the hook not run


def test_the_harness_s_git_never_gets_its_secrets(monkeypatch: pytest.MonkeyPatch) -> None:
    secrets = (
        "SLACK_BOT_TOKEN",
        "ANTHROPIC_API_KEY",
        "GITHUB_TOKEN",
        "GH_TOKEN",
        "CLAUDE_CODE_OAUTH_TOKEN",
        "HARNESS_SECRET_KEY",
        "OPENAI_API_KEY",
        "AWS_SECRET_ACCESS_KEY",
        "DEPLOY_TOKEN",
        "GIT_CONFIG_PARAMETERS",
        "GIT_CONFIG_COUNT",
    )
    for name in secrets:
        monkeypatch.setenv(name, "secret")
    monkeypatch.setenv("PATH", os.environ["PATH"])

    env, minimal = git_env(), git_env(inherit=False)

    assert not set(secrets) & set(env)
    assert env["PATH"] == os.environ["PATH"]
    assert env["GIT_CONFIG_GLOBAL"] == os.environ["GIT_CONFIG_GLOBAL"]  # the operator's own
    assert set(minimal) <= {"PATH", "HOME", "LC_ALL", "LANGUAGE", "GIT_TERMINAL_PROMPT"} | {
        "GIT_OPTIONAL_LOCKS"
    }


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
