"""Whether a spare agent can still serve, and what it costs while it waits: its CLI process
tree read from /proc (alive, resident memory), its folder looked at without following a
link an agent may have put there, and the Claude Code configuration a folder carries.

Blocking (``/proc`` and the folder are read), but for ``checked``: callers run the others in
a worker thread.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Literal

from harness.boundary.files import BoundaryError, Folder, entry_kind

# The folder the CLI watches in its working folder (skills, commands, agents, settings) and
# loads from again when it changes, even with no setting source: a spare started before
# they appeared (its folder became a task's) would take them in. A folder carrying it, as
# anything (a link is not followed, but the CLI would follow it), gets no spare: its agent
# starts cold, where none of it is loaded.
WATCHED = ".claude"
PAGE = os.sysconf("SC_PAGE_SIZE")


def _children(pid: int) -> list[int]:
    """The processes whose parent is ``pid`` (every thread's list, as the kernel keeps)."""
    found: list[int] = []
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return found
    for task in tasks:
        try:
            with open(f"/proc/{pid}/task/{task}/children", encoding="utf-8") as listed:
                found += [int(each) for each in listed.read().split()]
        except (OSError, ValueError):
            continue
    return found


def process_tree(pid: int) -> list[int]:
    """``pid`` and every process below it that is still there."""
    tree, todo = [], [pid]
    while todo:
        each = todo.pop()
        if os.path.exists(f"/proc/{each}") and each not in tree:
            tree.append(each)
            todo += _children(each)
    return tree


def _stat(pid: int) -> tuple[str, str, int] | None:
    """A process's name, state and resident pages; None when it is gone."""
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8", errors="replace") as file:
            text = file.read()
    except OSError:
        return None
    # pid (comm) state ...: comm may hold spaces and parentheses, so split at the last ')'.
    fields = text[text.rindex(")") + 2 :].split()
    return text[text.index("(") + 1 : text.rindex(")")], fields[0], int(fields[21])


def cli_running(pid: int | None) -> bool:
    """Whether the process ``pid`` (a CLI's launcher: its sandbox) and a ``claude`` process
    below it are alive (neither ended nor a zombie)."""
    if pid is None:
        return False
    top = _stat(pid)
    if top is None or top[1] in ("Z", "X"):
        return False
    for each in process_tree(pid):
        stat = _stat(each)
        if stat is not None and "claude" in stat[0] and stat[1] not in ("Z", "X"):
            return True
    return False


def resident_bytes(pid: int | None) -> int:
    """The resident memory of ``pid`` and every process below it, in bytes (0: gone)."""
    if pid is None:
        return 0
    total = 0
    for each in process_tree(pid):
        stat = _stat(each)
        if stat is not None:
            total += stat[2] * PAGE
    return total


def folder_intact(view: Path, *, link: bool = False) -> bool:
    """Whether a spare's folder is still there as it was made: a folder at ``view`` (a
    link to one when ``link``: a follow-up's view of its task's folder)."""
    try:
        info = os.lstat(view)
    except OSError:
        return False
    if link:
        return os.path.islink(view) and os.path.isdir(view)
    return not os.path.islink(view) and os.path.isdir(view) and info.st_nlink > 0


def carries_cli_config(folder: Path) -> bool:
    """Whether ``folder`` (an agent-written one) holds what the CLI watches (``WATCHED``),
    as anything at all; True also when the folder cannot be looked at (no spare is then the
    safe side)."""
    try:
        with Folder.open(folder) as opened:
            return entry_kind(opened, (WATCHED,)) != "missing"
    except (BoundaryError, OSError):
        return True


Health = Literal["ready", "dead", "folder", "config"]


def health(pid: int | None, view: Path, *, link: bool = False) -> Health:
    """Whether a spare can serve (blocking): its CLI (``pid``) running, its folder at
    ``view`` as made (a link to its task's when ``link``), and nothing there its CLI would
    load."""
    if not cli_running(pid):
        return "dead"
    if not folder_intact(view, link=link):
        return "folder"
    return "config" if carries_cli_config(view) else "ready"


async def checked(pid: int | None, view: Path, *, link: bool = False) -> Health:
    return await asyncio.to_thread(health, pid, view, link=link)
