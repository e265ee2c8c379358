"""Copying every task between the tasks folder and the NATS store (``harness store migrate``).

Each task is copied as stored: its record byte for byte (a damaged one stays damaged, to be
repaired where it lands), each log and text file whole; then read back and compared. The
source is only read, so an interrupted copy loses nothing, and a second run skips each task
already there and equal, and finishes the rest: a file of the destination that differs is
written again (a log whole: never appended twice). A task of the destination with the same
slug but another creation time is another task: it is left alone and reported.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from harness.atomic import write_atomic
from harness.errors import HarnessError
from harness.tasks import nats_files
from harness.tasks.common import LOCK_FILE, SLUG_RE, TASK_FILE, check_file_name
from harness.tasks.nats_kv import live_keys
from harness.tasks.nats_records import TASK
from harness.tasks.nats_store import NatsTaskStore


class Side(Protocol):
    """One store as the copy sees it: records and files as bytes."""

    where: str

    async def slugs(self) -> list[str]: ...
    async def record(self, slug: str) -> bytes | None: ...
    async def files(self, slug: str) -> tuple[list[str], list[str]]:
        """(logs, text files) by name in the task folder."""
        ...

    async def read(self, slug: str, name: str, *, log: bool) -> bytes | None: ...
    async def write(self, slug: str, name: str, data: bytes, *, log: bool) -> None: ...
    async def write_record(self, slug: str, data: bytes) -> None: ...


class FolderSide:
    """The tasks folder, read and written directly: the file store's index catches up with
    task.json files written by others when it is next opened."""

    def __init__(self, tasks_dir: Path) -> None:
        self.tasks_dir = tasks_dir
        self.where = f"the tasks folder {tasks_dir}"

    async def slugs(self) -> list[str]:
        def found() -> list[str]:
            if not self.tasks_dir.is_dir():
                return []
            return sorted(
                entry.name
                for entry in os.scandir(self.tasks_dir)
                if SLUG_RE.match(entry.name) and (Path(entry.path) / TASK_FILE).is_file()
            )

        return await asyncio.to_thread(found)

    async def record(self, slug: str) -> bytes | None:
        return await self._read(self.tasks_dir / slug / TASK_FILE)

    async def files(self, slug: str) -> tuple[list[str], list[str]]:
        def walk() -> list[str]:
            folder = self.tasks_dir / slug
            names = []
            for path in sorted(folder.rglob("*")):
                name = path.relative_to(folder).as_posix()
                if not path.is_file() or path.is_symlink() or name in (TASK_FILE, LOCK_FILE):
                    continue
                try:
                    check_file_name(name)
                except HarnessError:
                    continue  # never written by the store (a dot file, a deeper folder)
                names.append(name)
            return names

        names = await asyncio.to_thread(walk)
        return [n for n in names if n.endswith(".jsonl")], [
            n for n in names if not n.endswith(".jsonl")
        ]

    async def read(self, slug: str, name: str, *, log: bool) -> bytes | None:
        return await self._read(self.tasks_dir / slug / name)

    async def write(self, slug: str, name: str, data: bytes, *, log: bool) -> None:
        await asyncio.to_thread(self._write, self.tasks_dir / slug / name, data)

    async def write_record(self, slug: str, data: bytes) -> None:
        await asyncio.to_thread(self._write, self.tasks_dir / slug / TASK_FILE, data)

    @staticmethod
    def _write(path: Path, data: bytes) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path, data)

    @staticmethod
    async def _read(path: Path) -> bytes | None:
        try:
            return await asyncio.to_thread(path.read_bytes)
        except FileNotFoundError:
            return None


class NatsSide:
    def __init__(self, store: NatsTaskStore) -> None:
        self.store = store
        self.where = store.where

    async def slugs(self) -> list[str]:
        buckets = await self.store.buckets()
        keys = await live_keys(buckets.js, buckets.names.tasks, f"{TASK}>")
        return sorted(key.removeprefix(TASK) for key in keys)

    async def record(self, slug: str) -> bytes | None:
        return await self.store.raw(slug)

    async def files(self, slug: str) -> tuple[list[str], list[str]]:
        return await nats_files.file_names(await self.store.buckets(), slug)

    async def read(self, slug: str, name: str, *, log: bool) -> bytes | None:
        buckets = await self.store.buckets()
        if log:
            return await nats_files.log_bytes(buckets, slug, name) or None
        return await nats_files.read_object(buckets, slug, name)

    async def write(self, slug: str, name: str, data: bytes, *, log: bool) -> None:
        buckets = await self.store.buckets()
        if not log:
            await nats_files.write_object(buckets, slug, name, data)
            return
        subject = buckets.names.log_subject(slug, name)
        await buckets.js.purge_stream(buckets.names.logs, subject=subject)
        await nats_files.append_log(buckets, slug, name, data)

    async def write_record(self, slug: str, data: bytes) -> None:
        await self.store.put_record(slug, data)


@dataclass
class Migration:
    """What a copy did, task by task."""

    copied: list[str] = field(default_factory=list)
    already: list[str] = field(default_factory=list)  # there and equal: skipped
    conflicts: list[str] = field(default_factory=list)  # another task of that slug there
    failed: list[str] = field(default_factory=list)  # read back unequal

    @property
    def ok(self) -> bool:
        return not self.conflicts and not self.failed


async def migrate(source: Side, dest: Side, say: Callable[[str], None]) -> Migration:
    """Copies every task of ``source`` into ``dest``, verified; ``say`` hears of each."""
    done = Migration()
    for slug in await source.slugs():
        data = await source.record(slug)
        if data is None:
            continue  # deleted meanwhile
        there = await dest.record(slug)
        if there is not None and there != data and not _same_task(there, data):
            done.conflicts.append(slug)
            say(f"{slug}: {dest.where} holds another task of this name; left as it is")
            continue
        logs, texts = await source.files(slug)
        names = [(name, True) for name in logs] + [(name, False) for name in texts]
        if there == data and await _equal_files(source, dest, slug, names):
            done.already.append(slug)
            continue
        for name, log in names:
            content = await source.read(slug, name, log=log)
            if content is not None and await dest.read(slug, name, log=log) != content:
                await dest.write(slug, name, content, log=log)
        # The record last: a copy cut short leaves no task that lacks its files.
        await dest.write_record(slug, data)
        if await dest.record(slug) == data and await _equal_files(source, dest, slug, names):
            done.copied.append(slug)
            say(f"{slug}: copied ({len(names)} files)")
        else:
            done.failed.append(slug)
            say(f"{slug}: read back from {dest.where}, it differs; run the migration again")
    return done


async def _equal_files(source: Side, dest: Side, slug: str, names: list[tuple[str, bool]]) -> bool:
    for name, log in names:
        if await source.read(slug, name, log=log) != await dest.read(slug, name, log=log):
            return False
    return True


def _same_task(one: bytes, other: bytes) -> bool:
    """Whether two records are one task at two moments: the same creation time."""
    try:
        first, second = json.loads(one), json.loads(other)
    except ValueError:
        return False
    if not isinstance(first, dict) or not isinstance(second, dict):
        return False
    return first.get("created") is not None and first.get("created") == second.get("created")
