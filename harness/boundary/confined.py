"""Running a command of the operator's over an agent's folder inside a bubblewrap sandbox.

Rule: a command the harness runs in a folder an agent wrote (a metadata field such as ``git
status`` or ``cat VERSION``) sees that folder and the system read-only, nothing of the
harness (no secret, no file of its own, no home), and no network; its environment is PATH,
HOME (an empty ``/tmp``) and LANG. Whatever the agent configured there (a link to a secret,
a git filter, hook or fsmonitor, a nested repository) then runs with nothing to take and
nowhere to write; only its output comes out.

A worktree's git needs its admin folder and its repository's git directory too: both are
shown read-only when the worktree's ``.git`` leads to them the way ``git worktree add``
made it (the admin folder's ``gitdir`` names this worktree back), so no folder the agent
could not already read is shown.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from harness.boundary.files import read_link_file
from harness.sandbox.layout import (
    ISOLATION,
    MASKED_PATHS,
    shown_empty,
)
from harness.sandbox.runner import (
    SandboxUnavailableError,
    bwrap_binary,
    check_sandbox,
    shown_system,
)

logger = logging.getLogger(__name__)

HOME = "/tmp"
LANG = "C.UTF-8"


@dataclass(frozen=True)
class View:
    """What a confined command is shown: its folder (where it runs) and git folders of a
    worktree, read-only, by resolved path; and of the machine what an agent's sandbox shows
    (the system, the toolchains' part of /etc)."""

    cwd: str
    shown: tuple[str, ...]
    system: tuple[str, ...]
    links: tuple[tuple[str, str], ...]  # /etc entries that are links: (path, target)
    masked: tuple[tuple[str, bool], ...]  # (path, is a folder)


def view_of(folder: Path) -> View:
    """The view for a command in ``folder``. Blocking."""
    cwd = os.path.realpath(folder)
    system, links = shown_system()  # what an agent's sandbox shows of the machine
    masked = tuple((path, os.path.isdir(path)) for path in MASKED_PATHS if os.path.lexists(path))
    shown = (cwd, *_worktree_git(Path(cwd)))
    return View(cwd, shown, tuple(system), tuple(links), masked)


def _worktree_git(worktree: Path) -> tuple[str, ...]:
    found = worktree_git_dirs(worktree)
    return () if isinstance(found, str) else (str(found[1]), str(found[0]))


def worktree_git_dirs(worktree: Path) -> tuple[Path, Path] | str:
    """A linked worktree's admin folder and its repository's git directory, resolved, when
    its ``.git`` file leads to them and back the way ``git worktree add`` made them (the
    admin folder a folder of ``<repository>/worktrees``, its ``commondir`` naming that
    repository, its ``gitdir`` this worktree); else why not. The three files are the
    agent's: read without following a link, and what they say is never repeated (a link
    to a secret would be). Blocking."""
    dot_git = worktree / ".git"
    text = read_link_file(dot_git)
    if text is None or not text.startswith("gitdir:"):
        return f"{dot_git} is not a file naming a git directory"
    admin = Path(os.path.realpath(worktree / text.removeprefix("gitdir:").strip()))
    if admin.parent.name != "worktrees" or not admin.is_dir():
        return "its .git names no folder of a repository's worktrees"
    common = admin.parent.parent
    named, back = read_link_file(admin / "commondir"), read_link_file(admin / "gitdir")
    if named is None or os.path.realpath(admin / named) != str(common):
        return f"{admin}/commondir does not name the repository {common}"
    if back is None or os.path.realpath(admin / back) != os.path.realpath(dot_git):
        return f"{admin}/gitdir does not name this worktree"
    return admin, common


def command_args(bwrap: str, view: View, command: Sequence[str], path: str) -> list[str]:
    """bubblewrap's command line running ``command`` in ``view`` with PATH ``path``. Pure."""
    args = [bwrap, *ISOLATION, "--cap-drop", "ALL"]  # no network, its own pids, users and IPC
    for folder in view.system:
        args += ["--ro-bind", folder, folder]
    for link, target in view.links:
        args += ["--symlink", target, link]
    for masked, is_folder in view.masked:
        args += shown_empty(masked, is_folder)
    for folder in dict.fromkeys(view.shown):
        args += ["--ro-bind", folder, folder]
    args += ["--chdir", view.cwd, "--clearenv"]
    args += ["--setenv", "PATH", path, "--setenv", "HOME", HOME, "--setenv", "LANG", LANG]
    return [*args, "--", *command]


async def confining() -> str | None:
    """The bubblewrap to confine commands with; None where it cannot run here."""
    try:
        await check_sandbox()
    except SandboxUnavailableError as exc:
        logger.debug("no sandbox for commands in agents' folders: %s", exc.message)
        return None
    return bwrap_binary()


async def confined_shell(bwrap: str, folder: Path, command: str) -> list[str]:
    """The command line running the shell ``command`` confined in ``folder``."""
    view = await asyncio.to_thread(view_of, folder)
    path = os.environ.get("PATH", "/usr/bin:/bin")
    return command_args(bwrap, view, ["/bin/sh", "-c", command], path)
