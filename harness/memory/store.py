"""Where the team's notes are kept: a store per scope behind ``MemoryStore``, and the file
store's implementation, ``<tasks dir>/.memory/<kind>-<name>.json``.

A change is a read, a pure function and a write under one lock: an ``asyncio.Lock`` in this
process and an ``flock`` on ``.memory/.lock`` across processes (the bot and ``harness memory``
in a terminal), the file replaced atomically. A file that does not read as notes is never
overwritten: a change to its scope is refused, naming the file, and readers get no notes
from it (logged).
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import json
import logging
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Protocol

from harness.atomic import write_atomic
from harness.memory.model import Note, NoteError, note_from_json, note_to_json, split_scope

logger = logging.getLogger(__name__)

MEMORY_FOLDER = ".memory"
_LOCK = ".lock"
_FORMAT = 1

Change = Callable[[tuple[Note, ...]], tuple[Note, ...]]


class MemoryStore(Protocol):
    """The notes of each scope, read and changed whole."""

    async def notes(self, scope: str) -> tuple[Note, ...]:
        """The scope's notes, oldest first (none when it has none)."""
        ...

    async def change(self, scope: str, change: Change) -> tuple[Note, ...]:
        """Applies ``change`` to the scope's notes and keeps what it returns, atomically
        with respect to every other change; what ``change`` raises leaves them as they were."""
        ...

    async def scopes(self) -> list[str]:
        """Every scope that holds notes."""
        ...


def memory_folder(tasks_dir: Path) -> Path:
    return tasks_dir / MEMORY_FOLDER


class DamagedMemoryError(NoteError):
    def __init__(self, scope: str, file: str, problem: str) -> None:
        super().__init__(
            "MEMORY_DAMAGED",
            f"the notes of {scope} cannot be read: {file}: {problem}",
            fix=f"fix or move {file} aside by hand (nothing overwrites it), then try again",
            scope=scope,
        )


class FileMemoryStore:
    """The notes in ``folder`` (``memory_folder(tasks_dir)``), one JSON file per scope."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self._lock = asyncio.Lock()

    def file(self, scope: str) -> Path:
        kind, name = split_scope(scope)
        return self.folder / f"{kind}-{name}.json"

    async def notes(self, scope: str) -> tuple[Note, ...]:
        try:
            return await asyncio.to_thread(self._read, scope)
        except DamagedMemoryError as exc:
            logger.warning("%s", exc.message)
            return ()

    async def change(self, scope: str, change: Change) -> tuple[Note, ...]:
        async with self._lock:
            return await asyncio.to_thread(self._change, scope, change)

    async def scopes(self) -> list[str]:
        return await asyncio.to_thread(self._scopes)

    def _scopes(self) -> list[str]:
        if not self.folder.is_dir():
            return []
        found = []
        for path in sorted(self.folder.glob("*.json")):
            kind, sep, name = path.stem.partition("-")
            if sep and kind in ("channel", "repository") and name:
                found.append(f"{kind}:{name}")
        return found

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        self.folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd = os.open(self.folder / _LOCK, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)  # closing the only descriptor releases the flock

    def _read(self, scope: str) -> tuple[Note, ...]:
        file = self.file(scope)
        try:
            raw = file.read_bytes()
        except FileNotFoundError:
            return ()
        except OSError as exc:
            raise DamagedMemoryError(scope, str(file), str(exc)) from exc
        return parse_notes(raw, scope, str(file))

    def _change(self, scope: str, change: Change) -> tuple[Note, ...]:
        with self._locked():
            notes = change(self._read(scope))
            write_atomic(self.file(scope), dump_notes(notes), mode=0o600)
            return notes


def parse_notes(raw: bytes, scope: str, where: str) -> tuple[Note, ...]:
    """A scope's notes as a store keeps them (``where``: the file or key, for the error)."""
    try:
        data: Any = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise DamagedMemoryError(scope, where, f"not JSON ({exc})") from exc
    items = data.get("notes") if isinstance(data, dict) else None
    if not isinstance(items, list):
        raise DamagedMemoryError(scope, where, "no list of notes")
    notes = [note_from_json(item, scope) for item in items]
    return tuple(note for note in notes if note is not None)


def dump_notes(notes: tuple[Note, ...]) -> bytes:
    data = {"format": _FORMAT, "notes": [note_to_json(note) for note in notes]}
    return (json.dumps(data, indent=2, ensure_ascii=False) + "\n").encode("utf-8")
