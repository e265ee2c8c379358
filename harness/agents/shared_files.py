"""Files agents share with the task's humans (the ``share_file`` tool): a service of the core.

A front end that can show a file to a task's people (the Slack bot: uploaded to the task's
thread) registers a ``FileChannel``; the service reads the file from the agent's folder,
within ``slack.files``' limits, and hands it to the first channel that reaches the task.

The folder is the agent's to write, links and swaps included: a path is taken relative to
it (an absolute one only lexically inside it, no ``..``), every name opened by handle with
no link followed, and what is shared is exactly the bytes read from the handle that was
checked (``harness.boundary.files``). A link is refused, even one to a file inside.
"""

from __future__ import annotations

import asyncio
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from harness.agents.pool import AgentPool
from harness.boundary.files import BoundaryError, Folder, read_file, split_in_folder
from harness.config.settings import Config
from harness.errors import ToolError
from harness.runtime.attachments import human_size, safe_name
from harness.tasks.model import Task
from harness.tasks.store import TaskStore
from harness.workspaces.views import VIEWS


@dataclass(frozen=True)
class SharedFile:
    """A file an agent shares: its name, the title shown with it and its exact bytes."""

    task_slug: str
    agent_id: str
    role: str
    name: str
    title: str
    content: bytes


class FileChannel(Protocol):
    def reaches(self, task: Task) -> bool:
        """Whether this front end can show a file of this task to its people."""
        ...

    async def share(self, file: SharedFile, task: Task) -> str | None:
        """Shows the file (e.g. uploads it to the task's thread); why not, when it could not."""
        ...


def _names(folder: Path, path: str) -> tuple[str, ...]:
    """The names of ``path`` below ``folder``: relative to it, or absolute and lexically in
    it as the harness knows it (its path, or that resolved) or as the agent's sandbox shows
    it (its view). Blocking (readlinks of the harness's own paths)."""
    try:
        return split_in_folder(folder, path, also=[os.path.realpath(folder)])
    except BoundaryError:
        in_view = _in_view(folder, path)
        if in_view is None:
            raise
        return in_view


def _in_view(folder: Path, path: str) -> tuple[str, ...] | None:
    """The names of ``path`` below ``folder``'s view (``<root>/.views/<id>``, the path a
    sandboxed agent is shown its folder at), when it lies in one that leads to ``folder``.
    Views are the harness's links in a folder of its own, so resolving one asks nothing of
    the agent; what follows it is opened by handle like any path."""
    views = folder.parent / VIEWS
    try:
        names = split_in_folder(views, path)
    except BoundaryError:
        return None
    if not names or os.path.realpath(views / names[0]) != os.path.realpath(folder):
        return None
    return names[1:]


def _tool_error(error: BoundaryError, max_bytes: int) -> ToolError:
    """What the agent is told: the boundary's words, the size limit said as configured."""
    if error.reason == "too-large":
        size = f"is {human_size(error.size)}" if error.size is not None else "grew while read"
        return ToolError(
            "LIMIT_EXCEEDED",
            f"{error.path} {size}; files shared in the thread may be at most "
            f"{human_size(max_bytes)} (slack.files.maxBytes in config.yaml)",
            "share a smaller file (compress it, or share an excerpt or a summary)",
        )
    return ToolError(error.code, error.message, error.suggestion)


def _read(folder: Path, path: str, max_bytes: int) -> tuple[str, bytes]:
    """The name and exact bytes of the file ``path`` in the agent's ``folder``, opened by
    handle, no link followed (blocking). BoundaryError when it is not such a file."""
    names = _names(folder, path)
    with Folder.open(folder) as opened:
        content = read_file(opened, names, max_bytes, shown=path)
    return names[-1], content


class SharedFiles:
    """Reads a file of a live agent's folder and hands it to a front end that shows it."""

    def __init__(self, config: Config, store: TaskStore, pool: AgentPool) -> None:
        self._config = config
        self._store = store
        self._pool = pool
        self._file_channels: list[FileChannel] = []

    def add_file_channel(self, channel: FileChannel) -> None:
        """A front end that can show files agents share to the task's people."""
        self._file_channels.append(channel)

    async def share_file(self, agent_id: str, path: str, title: str | None = None) -> SharedFile:
        """Shares a file of the live agent's folder with its task's people. ToolError when
        the path leads out of the folder or to no file, the file is over the limit, or no
        front end reaches the task's people (or it could not show the file)."""
        entry = self._pool.live(agent_id)
        limit = self._config.slack.files.max_bytes
        try:
            name, content = await asyncio.to_thread(_read, entry.cwd, path, limit)
        except BoundaryError as error:
            worker = entry.control.worker
            if worker is not None and error.reason in ("missing", "not-a-folder"):
                raise ToolError(
                    "UNSUPPORTED",
                    f"you run on worker {worker}, and files are shared from the harness's own "
                    f"machine, where {path} is not",
                    "say in your result where the file is instead",
                ) from error
            raise _tool_error(error, limit) from error
        task = await self._store.get(entry.task_slug)
        channel = next((c for c in self._file_channels if c.reaches(task)), None)
        if channel is None:
            raise ToolError(
                "NO_HUMAN_CHANNEL",
                "nobody can be shown a file for this task (it has no thread)",
                "say in your result where the file is instead",
            )
        name = safe_name(name)
        shared = SharedFile(
            entry.task_slug, agent_id, entry.role, name, (title or "").strip() or name, content
        )
        problem = await channel.share(shared, task)
        if problem is not None:
            raise ToolError(
                "SHARE_FAILED",
                f"{path} could not be shared: {problem}",
                "say in your result where the file is instead",
            )
        return shared
