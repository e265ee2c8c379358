"""git over what an agent wrote runs no program the agent (or anyone's config but the
repository's) could configure: real git in temp folders, each program a canary that would
leave a file outside the agent's folder."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

from harness.boundary import git_work as agent_work
from harness.boundary.git import HARDENING, NestedRepositoryError, Tree, confine, disarmed_env
from harness.boundary.git_work import (
    commit_all,
    diff_files,
    diff_patch,
    folder_patch,
    has_uncommitted_work,
    scratch_has_commits,
)
from harness.errors import WorkspaceError

pytestmark = [pytest.mark.anyio, pytest.mark.git]

OLD = 1_000_000_000  # a modification time far back: a file git must read again


def git(cwd: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-c", "user.name=Agent", "-c", "user.email=agent@example.com", *args],
        cwd=cwd,
        check=True,
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": "/dev/null"},
    )
    return done.stdout.strip()


class Canary:
    """Programs that, run, leave a file in a folder outside every agent's folder."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        folder.mkdir()

    def script(self, name: str, body: str = "") -> Path:
        """An executable that leaves ``name`` (with its environment), then runs ``body``."""
        path = self.folder / f"{name}.sh"
        path.write_text(f"#!/bin/sh\nenv > {self.folder / name}\n{body}\n", encoding="utf-8")
        path.chmod(0o755)
        return path

    def filter(self, name: str) -> str:
        """A clean/smudge filter command: leaves ``name``, passes the content through."""
        return f"{self.script(name, 'cat')} %f"

    @property
    def ran(self) -> list[str]:
        """The canaries left (files named without a dot)."""
        return sorted(p.name for p in self.folder.iterdir() if p.is_file() and "." not in p.name)

    def clear(self) -> None:
        for name in self.ran:
            (self.folder / name).unlink()


@pytest.fixture
def canary(tmp_path: Path) -> Canary:
    return Canary(tmp_path / "outside")


@pytest.fixture(autouse=True)
def operator_git(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, canary: Canary) -> Path:
    """The harness user's own git config, system and global, as a machine may have them:
    drivers a tree's .gitattributes could name, and programs git would start."""
    config = tmp_path / "operator.gitconfig"
    config.write_text(
        "[user]\n\tname = Operator\n\temail = op@example.com\n"
        f'[filter "lfs"]\n\tclean = {canary.filter("global-clean")}\n'
        f"\tsmudge = {canary.filter('global-smudge')}\n"
        f'[diff "lfs"]\n\ttextconv = {canary.script("global-textconv", "cat $1")}\n'
        f"[core]\n\tfsmonitor = {canary.script('global-fsmonitor')}\n",
        encoding="utf-8",
    )
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(config))
    monkeypatch.setenv("GIT_CONFIG_SYSTEM", str(config))
    monkeypatch.delenv("GIT_CONFIG_NOSYSTEM", raising=False)
    monkeypatch.setenv("GITHUB_TOKEN", "ghp-the-harness-token")
    return config


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    folder = tmp_path / "web"
    folder.mkdir()
    git(folder, "init", "-q", "-b", "main")
    (folder / "README.md").write_text("readme\n", encoding="utf-8")
    (folder / "app.py").write_text("print('hi')\n", encoding="utf-8")
    git(folder, "add", "-A")
    git(folder, "commit", "-q", "-m", "start")
    return folder


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return tmp_path / "workspaces"


@pytest.fixture
def worktree(repo: Path, root: Path) -> Path:
    git(repo, "worktree", "add", "-q", "-b", "harness/t-1", str(root / "t-1"), "main")
    return root / "t-1"


def stale(path: Path) -> None:
    """The file's content unchanged, its time not: git reads it again (through filters)."""
    os.utime(path, (OLD, OLD))


def nested_repository(folder: Path, canary: Canary, name: str = "nested-clean") -> None:
    """What an agent makes: a repository of its own whose config filters every file."""
    folder.mkdir()
    git(folder, "init", "-q")
    (folder / "a.txt").write_text("hi\n", encoding="utf-8")
    (folder / ".gitattributes").write_text("* filter=x\n", encoding="utf-8")
    git(folder, "add", "-A")
    git(folder, "commit", "-q", "-m", "v")
    git(folder, "config", "filter.x.clean", canary.filter(name))
    git(folder, "config", "filter.x.process", str(canary.script(f"{name}-process")))
    git(folder, "config", "core.fsmonitor", str(canary.script(f"{name}-fsmonitor")))


Operation = Callable[[Tree], Awaitable[object]]
OPERATIONS: dict[str, Operation] = {
    "status": has_uncommitted_work,
    "numstat": lambda tree: diff_files(tree, "main"),
    "diff": lambda tree: diff_patch(tree, "main"),
    "commit": lambda tree: commit_all(tree, "work", author="harness dev", email="h@example.com"),
    "nested": agent_work.nested,
}


@pytest.mark.parametrize("operation", sorted(OPERATIONS))
async def test_a_nested_repositorys_filter_never_runs(
    operation: str, worktree: Path, root: Path, canary: Canary
) -> None:
    nested_repository(worktree / "vendor", canary)
    git(worktree, "add", "vendor")  # the agent's own git, in its sandbox
    canary.clear()
    stale(worktree / "vendor" / "a.txt")
    (worktree / "app.py").write_text("print('work')\n", encoding="utf-8")

    await OPERATIONS[operation](await confine(worktree, root=root))

    assert canary.ran == []


async def test_commit_all_leaves_nested_repositories_out_with_their_files_kept(
    worktree: Path, root: Path, canary: Canary
) -> None:
    nested_repository(worktree / "vendor", canary)
    git(worktree, "add", "vendor")  # a gitlink the agent added
    (worktree / "lib" / "empty").mkdir(parents=True)
    git(worktree / "lib" / "empty", "init", "-q")  # no commit: `git add` of it fails
    (worktree / "app.py").write_text("print('work')\n", encoding="utf-8")
    tree = await confine(worktree, root=root)

    done = await commit_all(tree, "work", author="harness dev", email="h@example.com")

    assert done.commit == git(worktree, "rev-parse", "HEAD")
    assert done.left_out == ("lib/empty", "vendor")
    assert git(worktree, "ls-tree", "-r", "--name-only", "HEAD").split() == [
        "README.md",
        "app.py",
    ]
    assert "vendor" not in git(worktree, "ls-files", "--stage")
    assert (worktree / "vendor" / "a.txt").read_text(encoding="utf-8") == "hi\n"
    assert (worktree / "lib" / "empty" / ".git").is_dir()
    again = await commit_all(tree, "more", author="harness dev", email="h@example.com")
    assert again.commit is None and again.left_out == ("lib/empty", "vendor")


@pytest.mark.parametrize("operation", sorted(OPERATIONS))
async def test_attributes_in_the_tree_name_no_driver_of_the_machines_config(
    operation: str, worktree: Path, root: Path, canary: Canary
) -> None:
    (worktree / ".gitattributes").write_text("* filter=lfs diff=lfs\n", encoding="utf-8")
    stale(worktree / "README.md")
    (worktree / "app.py").write_text("print('work')\n", encoding="utf-8")

    await OPERATIONS[operation](await confine(worktree, root=root))

    assert canary.ran == []


# Settings of a config a harness call reads (the repository's), each naming a program;
# ``{script}`` is the canary, ``{hooks}`` a folder of canary hooks, ``{attributes}`` a file
# giving every path a filter the same config defines.
SETTINGS: dict[str, tuple[tuple[str, str], ...]] = {
    "fsmonitor": (("core.fsmonitor", "{script}"),),
    "hooks": (("core.hooksPath", "{hooks}"),),
    "diff.external": (("diff.external", "{script}"),),
    "textconv": (("diff.x.textconv", "{script}"),),
    "pager": (("core.pager", "{script}"),),
    "signing": (("gpg.program", "{script}"), ("commit.gpgSign", "true")),
    "alias": (("alias.status", "!{script}"), ("alias.diff", "!{script}")),
    "submodule recursion": (("submodule.recurse", "true"),),
    "submodule summary": (("status.submoduleSummary", "true"), ("diff.submodule", "diff")),
    "attributes file": (("core.attributesFile", "{attributes}"), ("filter.y.clean", "{script}")),
}
SUBMODULES = ("submodule recursion", "submodule summary")


@pytest.mark.parametrize("setting", sorted(SETTINGS))
async def test_no_setting_of_the_repository_starts_a_program(
    setting: str, repo: Path, worktree: Path, root: Path, canary: Canary
) -> None:
    hooks = canary.folder / "hooks"
    hooks.mkdir()
    for hook in ("pre-commit", "post-commit", "post-index-change", "reference-transaction"):
        (hooks / hook).symlink_to(canary.script(f"hook-{hook}"))
    attributes = canary.folder / "attributes.txt"
    attributes.write_text("* filter=y\n", encoding="utf-8")
    script = canary.script(setting.replace(" ", "-"), "cat")
    for key, value in SETTINGS[setting]:
        git(repo, "config", key, value.format(script=script, hooks=hooks, attributes=attributes))
    (worktree / ".gitattributes").write_text("* diff=x\n", encoding="utf-8")
    if setting in SUBMODULES:  # what recursion would descend into
        nested_repository(worktree / "vendor", canary)
        git(worktree, "add", "vendor")
        canary.clear()
        stale(worktree / "vendor" / "a.txt")
    stale(worktree / "README.md")
    (worktree / "app.py").write_text("print('work')\n", encoding="utf-8")
    tree = await confine(worktree, root=root)

    for operation in OPERATIONS.values():
        await operation(tree)

    assert canary.ran == []


async def test_a_worktree_config_the_agent_can_write_is_refused_where_git_would_read_it(
    repo: Path, worktree: Path, root: Path, canary: Canary
) -> None:
    admin = Path(git(worktree, "rev-parse", "--absolute-git-dir"))
    included = canary.folder / "included.cfg"
    included.write_text(f'[filter "x"]\n\tclean = {canary.filter("included")}\n')
    (admin / "config.worktree").write_text(
        f"[include]\n\tpath = {included}\n"
        f'[includeIf "gitdir:/"]\n\tpath = {included}\n'
        f'[filter "y"]\n\tclean = {canary.filter("worktree-config")}\n',
        encoding="utf-8",
    )
    (worktree / ".gitattributes").write_text("* filter=x\n*.py filter=y\n", encoding="utf-8")
    stale(worktree / "README.md")
    stale(worktree / "app.py")

    # Without the extension git never reads it: the worktree is used as it is.
    tree = await confine(worktree, root=root)
    for operation in OPERATIONS.values():
        await operation(tree)
    git(repo, "config", "extensions.worktreeConfig", "true")
    with pytest.raises(WorkspaceError, match="config of its own"):
        await confine(worktree, root=root)

    assert canary.ran == []


async def test_a_git_directory_the_agent_relinked_its_worktree_to_is_never_used(
    worktree: Path, root: Path, canary: Canary, tmp_path: Path
) -> None:
    # A repository of the agent's, in its folder, made to look like the worktree's own.
    fake = worktree / ".fake"
    git(tmp_path, "init", "-q", "--bare", str(fake))
    git(fake, "config", "filter.x.clean", canary.filter("relinked"))
    admin = fake / "worktrees" / "t-1"
    admin.mkdir(parents=True)
    (admin / "commondir").write_text("../..\n", encoding="utf-8")
    (admin / "gitdir").write_text(f"{worktree / '.git'}\n", encoding="utf-8")
    (admin / "HEAD").write_text("ref: refs/heads/main\n", encoding="utf-8")
    (worktree / ".git").write_text(f"gitdir: {admin}\n", encoding="utf-8")
    (worktree / ".gitattributes").write_text("* filter=x\n", encoding="utf-8")

    with pytest.raises(WorkspaceError, match="inside the workspaces"):
        await confine(worktree, root=root)

    assert canary.ran == []


async def test_folder_patch_reads_no_config_of_the_folders_own_git_nor_the_machines(
    tmp_path: Path, canary: Canary
) -> None:
    folder = tmp_path / "scratch"
    folder.mkdir()
    git(folder, "init", "-q")
    included = canary.folder / "included.cfg"
    included.write_text(f'[filter "x"]\n\tclean = {canary.filter("included")}\n')
    with (folder / ".git" / "config").open("a", encoding="utf-8") as config:
        config.write(
            f'[filter "x"]\n\tclean = {canary.filter("scratch-clean")}\n'
            f"\tsmudge = {canary.filter('scratch-smudge')}\n"
            f"\tprocess = {canary.script('scratch-process')}\n"
            f'[diff "x"]\n\ttextconv = {canary.script("scratch-textconv", "cat $1")}\n'
            f"[core]\n\tfsmonitor = {canary.script('scratch-fsmonitor')}\n"
            f"[include]\n\tpath = {included}\n"
            f"[alias]\n\tdiff = !{canary.script('scratch-alias')}\n"
        )
    (folder / ".gitattributes").write_text("* filter=x diff=x\n*.md filter=lfs\n")
    (folder / "notes.md").write_text("notes\n", encoding="utf-8")

    patch = await folder_patch(folder)

    assert canary.ran == []
    assert b"+notes" in patch and b"[filter" not in patch  # the folder's .git is no file
    assert not scratch_has_commits(folder)


async def test_folder_patch_refuses_a_folder_holding_a_repository_it_would_lose(
    tmp_path: Path, canary: Canary
) -> None:
    folder = tmp_path / "scratch"
    folder.mkdir()
    (folder / "notes.md").write_text("notes\n", encoding="utf-8")
    nested_repository(folder / "vendor", canary)
    canary.clear()

    with pytest.raises(NestedRepositoryError, match="vendor"):
        await folder_patch(folder)

    assert canary.ran == []


def test_a_scratch_folders_git_is_read_as_data(tmp_path: Path) -> None:
    folder = tmp_path / "scratch"
    folder.mkdir()
    assert not scratch_has_commits(folder)
    git(folder, "init", "-q")
    assert not scratch_has_commits(folder)
    (folder / "a.txt").write_text("a\n", encoding="utf-8")
    git(folder, "add", "a.txt")
    assert scratch_has_commits(folder)  # an object is work a patch of files would lose
    elsewhere = tmp_path / "elsewhere"
    (folder / ".git").rename(elsewhere)
    (folder / ".git").symlink_to(elsewhere)
    assert scratch_has_commits(folder)


def test_a_command_outside_the_sandbox_gets_no_secret_and_every_setting_disarmed(
    tmp_path: Path,
) -> None:
    env = disarmed_env(tmp_path / "t-1")

    assert "GITHUB_TOKEN" not in env and "GIT_CONFIG_SYSTEM" not in env
    assert set(env) - {"PATH", "HOME"} <= {
        *(name for name in env if name.startswith(("GIT_", "LANG", "LC_"))),
        "SSH_ASKPASS",
    }
    assert env["GIT_CONFIG_GLOBAL"] == "/dev/null" and env["GIT_CONFIG_NOSYSTEM"] == "1"
    pairs = {
        (env[f"GIT_CONFIG_KEY_{n}"], env[f"GIT_CONFIG_VALUE_{n}"])
        for n in range(int(env["GIT_CONFIG_COUNT"]))
    }
    assert pairs == {tuple(setting.split("=", 1)) for setting in HARDENING}
    assert ("diff.ignoreSubmodules", "all") in pairs and ("core.hooksPath", "/dev/null") in pairs


@pytest.mark.parametrize("link", ["commondir", "gitdir"])
async def test_a_link_file_turned_into_a_link_to_a_secret_is_not_read_out(
    link: str, worktree: Path, root: Path, tmp_path: Path
) -> None:
    secret = tmp_path / "harness.env"
    secret.write_text("SLACK_BOT_TOKEN=xoxb-on-disk\n", encoding="utf-8")
    admin = Path(git(worktree, "rev-parse", "--absolute-git-dir"))
    (admin / link).unlink()
    (admin / link).symlink_to(secret)  # the admin folder is writable in the sandbox

    with pytest.raises(WorkspaceError) as raised:
        await confine(worktree, root=root)

    assert "xoxb" not in str(raised.value) and "SLACK" not in str(raised.value)


async def test_an_index_turned_into_a_link_is_not_followed(
    worktree: Path, root: Path, tmp_path: Path
) -> None:
    secret = tmp_path / "harness.env"
    secret.write_text("SLACK_BOT_TOKEN=xoxb-on-disk\n", encoding="utf-8")
    admin = Path(git(worktree, "rev-parse", "--absolute-git-dir"))
    (admin / "index").unlink()
    (admin / "index").symlink_to(secret)

    with pytest.raises(WorkspaceError, match="not a file git made"):
        await diff_files(await confine(worktree, root=root), "main")
