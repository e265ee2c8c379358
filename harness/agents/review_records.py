"""One record per reviewed pull request head, in the task store's folder: what makes a review
happen once per head, whoever asks and however often an event is delivered.

``<tasks>/.reviews/<owner>.<repo>.<number>.<sha>.json`` is made with ``O_EXCL``: of two asks
for the same head (two people, a re-delivered event, two bot processes on one store) one
claims it and the other finds it. It then says where the review is: ``running`` (the task
and, once drafted, its reviewer), ``reviewed`` (the reviewer finished; its findings are in
its task, not yet on GitHub) or ``posted`` (the review's address).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, TypedDict

from harness.atomic import write_atomic
from harness.errors import HarnessError

FOLDER = ".reviews"
ReviewState = Literal["running", "reviewed", "posted"]
_UNSAFE = re.compile(r"[^a-z0-9_-]+")


class ReviewRecordJson(TypedDict):
    pull: str
    head: str
    state: ReviewState
    task: str | None
    agent: str | None
    url: str | None
    requestedBy: str | None
    at: str


@dataclass(frozen=True)
class ReviewRecord:
    pull: str  # owner/repo#number
    head: str
    state: ReviewState
    at: str  # when it was claimed or last changed
    task: str | None = None
    agent: str | None = None
    url: str | None = None
    requested_by: str | None = None

    def to_json(self) -> ReviewRecordJson:
        return {"pull": self.pull, "head": self.head, "state": self.state, "task": self.task,
                "agent": self.agent, "url": self.url, "requestedBy": self.requested_by,
                "at": self.at}  # fmt: skip


def _record(data: object, file: Path) -> ReviewRecord:
    if not isinstance(data, dict) or data.get("state") not in ("running", "reviewed", "posted"):
        raise HarnessError(
            f"the review record {file} is damaged",
            fix=f"delete {file}: the pull request's head is then reviewed again",
        )

    def text(key: str) -> str | None:
        value = data.get(key)
        return value if isinstance(value, str) else None

    return ReviewRecord(
        pull=text("pull") or "", head=text("head") or "", state=data["state"],
        at=text("at") or "", task=text("task"), agent=text("agent"), url=text("url"),
        requested_by=text("requestedBy"),
    )  # fmt: skip


class ReviewRecords:
    """The records under ``<tasks_dir>/.reviews``."""

    def __init__(self, tasks_dir: Path) -> None:
        self.folder = tasks_dir / FOLDER
        self._lock = asyncio.Lock()

    def file(self, pull: str, head: str) -> Path:
        name = _UNSAFE.sub(".", f"{pull}.{head}".lower().replace("#", "."))
        return self.folder / f"{name}.json"

    async def claim(self, record: ReviewRecord) -> ReviewRecord | None:
        """Makes ``record`` the head's, unless it has one: then that one (None: claimed)."""
        async with self._lock:
            return await asyncio.to_thread(self._claim, record)

    async def find(self, pull: str, head: str) -> ReviewRecord | None:
        async with self._lock:
            return await asyncio.to_thread(self._read, self.file(pull, head))

    async def save(self, record: ReviewRecord) -> ReviewRecord:
        async with self._lock:
            await asyncio.to_thread(self._write, record)
        return record

    async def drop(self, record: ReviewRecord) -> None:
        """Forgets the head's record: the next ask reviews it (a reviewer that failed)."""
        async with self._lock:
            with contextlib.suppress(FileNotFoundError):
                await asyncio.to_thread(os.unlink, self.file(record.pull, record.head))

    # -- in a worker thread ------------------------------------------------------------

    def _claim(self, record: ReviewRecord) -> ReviewRecord | None:
        file = self.file(record.pull, record.head)
        self.folder.mkdir(parents=True, exist_ok=True)
        try:
            fd = os.open(file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        except FileExistsError:
            found = self._read(file)
            if found is not None:
                return found
            fd = os.open(file, os.O_WRONLY | os.O_CREAT, 0o644)  # emptied by a crash
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(json.dumps(record.to_json()) + "\n")
            handle.flush()
            os.fsync(handle.fileno())
        return None

    def _read(self, file: Path) -> ReviewRecord | None:
        try:
            text = file.read_text(encoding="utf-8")
        except FileNotFoundError:
            return None
        if not text.strip():  # claimed by a process that stopped before writing it
            return None
        try:
            return _record(json.loads(text), file)
        except ValueError:
            return _record(None, file)

    def _write(self, record: ReviewRecord) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        data = json.dumps(record.to_json()) + "\n"
        write_atomic(self.file(record.pull, record.head), data.encode("utf-8"))
