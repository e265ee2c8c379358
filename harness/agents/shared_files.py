"""Files agents share with the task's humans (the ``share_file`` tool): a part of the
orchestrator's facade, kept in a module of its own.

A front end that can show a file to a task's people (the Slack bot: uploaded to the task's
thread) registers a ``FileChannel``; the orchestrator reads the file from the agent's folder,
within ``slack.files``' limits, and hands it to the first channel that reaches the task. A
path must lead, symbolic links followed, to a regular file inside the agent's folder.
"""

from __future__ import annotations

import asyncio
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from harness.agents.pool import AgentPool
from harness.config.settings import Config
from harness.errors import AgentNotFoundError, ToolError
from harness.runtime.attachments import human_size, safe_name
from harness.tasks.model import Task
from harness.tasks.store import Store


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


def _inside(folder: Path, path: str) -> Path:
    """``path`` (relative to ``folder``, or absolute) resolved, when it stays in ``folder``."""
    base = folder.resolve()
    target = (base / path).resolve()
    if target != base and base not in target.parents:
        raise ToolError(
            "PERMISSION_DENIED",
            f"{path} is outside your working folder {base}",
            "share a file inside your working folder (copy it there first)",
        )
    return target


def _read(target: Path, max_bytes: int, shown: str) -> bytes:
    """The file's bytes (blocking); ToolError when it is not a file or is too large."""
    try:
        if not target.is_file():
            what = "a folder" if target.is_dir() else "not there"
            raise ToolError(
                "INVALID_INPUT",
                f"{shown} is {what}, not a file",
                "give the path of a file in your working folder (relative to it)",
            )
        size = target.stat().st_size
        if size > max_bytes:
            raise ToolError(
                "LIMIT_EXCEEDED",
                f"{shown} is {human_size(size)}; files shared in the thread may be at most "
                f"{human_size(max_bytes)} (slack.files.maxBytes in config.yaml)",
                "share a smaller file (compress it, or share an excerpt or a summary)",
            )
        with open(target, "rb") as source:
            content = source.read(max_bytes + 1)
    except OSError as exc:
        raise ToolError(
            "INVALID_INPUT", f"{shown} cannot be read: {exc.strerror or exc}", "check the path"
        ) from exc
    if len(content) > max_bytes:  # it grew while being read
        raise ToolError(
            "LIMIT_EXCEEDED", f"{shown} is over {human_size(max_bytes)}", "share a smaller file"
        )
    return content


class FileSharingMethods:
    """Mixed into the orchestrator, whose parts these are."""

    _config: Config
    _store: Store
    _pool: AgentPool
    _file_channels: list[FileChannel]

    def _init_file_sharing(self) -> None:
        self._file_channels = []

    def add_file_channel(self, channel: FileChannel) -> None:
        """A front end that can show files agents share to the task's people."""
        self._file_channels.append(channel)

    async def share_file(self, agent_id: str, path: str, title: str | None = None) -> SharedFile:
        """Shares a file of the live agent's folder with its task's people. ToolError when
        the path leads out of the folder or to no file, the file is over the limit, or no
        front end reaches the task's people (or it could not show the file)."""
        entry = self._pool.get(agent_id)
        if entry is None:
            raise AgentNotFoundError(agent_id)
        target = _inside(entry.cwd, path)
        worker = entry.control.worker
        if worker is not None and not await asyncio.to_thread(target.exists):
            raise ToolError(
                "UNSUPPORTED",
                f"you run on worker {worker}, and files are shared from the harness's own "
                f"machine, where {path} is not",
                "say in your result where the file is instead",
            )
        limit = self._config.slack.files.max_bytes
        content = await asyncio.to_thread(_read, target, limit, path)
        task = await self._store.get(entry.task_slug)
        channel = next((c for c in self._file_channels if c.reaches(task)), None)
        if channel is None:
            raise ToolError(
                "NO_HUMAN_CHANNEL",
                "nobody can be shown a file for this task (it has no thread)",
                "say in your result where the file is instead",
            )
        name = safe_name(os.path.basename(target))
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
