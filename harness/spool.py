"""A folder of small JSON files, one per thing a process still owes someone, that outlives the
process: what the harness owes its workers (kills) and expects of them (late outcomes), what
a stopping worker could not hand NATS (its agents' last events), the final records the task
store could not take yet (``harness/agents/pending_finals.py``), and the requests a bot's full
disk kept from its ledger (``bot/unrecorded.py``).

Each file is written atomically (a reader or a crash sees the old version or the new one),
read without following a link, and removed once what it holds was delivered; an entry may
have files *beside* it (``<name><suffix>``: a record's diff), written before it and removed
just before it. The folder is the harness's own (never an agent's): made private to this user. An
entry that cannot be read is moved aside and named in the log (or, for a reader that must
not change the folder, left as it is), never taken for something owed. File work runs in
worker threads; nothing here blocks the event loop.
"""

from __future__ import annotations

import asyncio
import errno
import json
import logging
import os
import re
import stat
from pathlib import Path
from typing import Any

from harness.atomic import write_atomic

logger = logging.getLogger(__name__)

_SUFFIX = ".json"
_NAME = re.compile(r"^[A-Za-z0-9_-][A-Za-z0-9_.-]{0,159}$")
_BESIDE = re.compile(r"^\.[a-z]{1,16}$")
_MAX_BYTES = 64 * 1024 * 1024  # an entry holds at most a run's last events


class Spool:
    """``folder``'s entries, by name (letters, digits, ``_``, ``-`` and ``.``)."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    async def put(self, name: str, data: dict[str, Any]) -> None:
        """Keeps ``data`` under ``name`` (replacing what it held). OSError when the disk
        refuses it."""
        encoded = json.dumps(data, ensure_ascii=False).encode("utf-8")
        await asyncio.to_thread(self._put, _checked(name), encoded)

    async def put_beside(self, name: str, suffix: str, data: bytes) -> None:
        """Keeps ``data`` beside the entry ``name`` (before the entry that names it).
        OSError when the disk refuses it."""
        await asyncio.to_thread(self._put_file, f"{_checked(name)}{_beside(suffix)}", data)

    async def drop(self, name: str, *, beside: tuple[str, ...] = ()) -> None:
        """Forgets ``name`` (delivered), and its files ``beside``; a disk that refuses is
        logged, and the entry is delivered again later, which its readers take as a repeat."""
        # The entry last: no file beside it outlives it, and one that went before it is
        # not missed (what it held was delivered with the entry).
        files = [f"{_checked(name)}{suffix}" for suffix in (*map(_beside, beside), _SUFFIX)]
        try:
            await asyncio.to_thread(self._remove, files)
        except OSError as exc:
            logger.warning("could not remove %s from %s: %s", name, self.folder, exc)

    async def entries(self, *, set_aside: bool = True) -> list[tuple[str, dict[str, Any]]]:
        """(name, data) of every entry, oldest first; one that cannot be read is set aside,
        or (not ``set_aside``: a reader that changes nothing) left as it is."""
        return await asyncio.to_thread(self._entries, set_aside)

    async def get(self, name: str) -> dict[str, Any] | None:
        """The entry ``name``; None when there is none, or it cannot be read (logged)."""
        file = self.folder / f"{_checked(name)}{_SUFFIX}"
        try:
            return (await asyncio.to_thread(self._read, file))[0]
        except (FileNotFoundError, NotADirectoryError):
            return None
        except (OSError, ValueError) as exc:
            logger.warning("%s cannot be read (left as it is): %s", file, exc)
            return None

    async def get_beside(self, name: str, suffix: str) -> bytes | None:
        """What is kept beside the entry ``name``; None when nothing is (or it cannot be
        read: logged)."""
        file = self.folder / f"{_checked(name)}{_beside(suffix)}"
        try:
            return await asyncio.to_thread(self._read_bytes, file)
        except (FileNotFoundError, NotADirectoryError):
            return None
        except (OSError, ValueError) as exc:
            logger.warning("%s cannot be read: %s", file, exc)
            return None

    def _remove(self, files: list[str]) -> None:
        for file in files:
            (self.folder / file).unlink(missing_ok=True)

    def _put(self, name: str, encoded: bytes) -> None:
        self._put_file(f"{name}{_SUFFIX}", encoded)

    def _put_file(self, file: str, data: bytes) -> None:
        self.folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        write_atomic(self.folder / file, data, mode=0o600)

    def _entries(self, set_aside: bool) -> list[tuple[str, dict[str, Any]]]:
        try:
            files = [
                entry
                for entry in os.scandir(self.folder)
                if entry.name.endswith(_SUFFIX) and _NAME.match(entry.name[: -len(_SUFFIX)])
            ]
        except (FileNotFoundError, NotADirectoryError):
            return []
        found: list[tuple[float, str, dict[str, Any]]] = []
        for entry in files:
            name = entry.name[: -len(_SUFFIX)]
            try:
                data, modified = self._read(Path(entry.path))
            except FileNotFoundError:  # delivered meanwhile
                continue
            except (OSError, ValueError) as exc:
                if set_aside:
                    self._set_aside(Path(entry.path), exc)
                else:
                    logger.warning("%s cannot be read (left as it is): %s", entry.path, exc)
                continue
            found.append((modified, name, data))
        return [(name, data) for _, name, data in sorted(found, key=lambda f: (f[0], f[1]))]

    @staticmethod
    def _read(file: Path) -> tuple[dict[str, Any], float]:
        raw, modified = Spool._read_file(file)
        data = json.loads(raw.decode("utf-8"))
        if not isinstance(data, dict):
            raise ValueError("not a JSON object")
        return data, modified

    @staticmethod
    def _read_bytes(file: Path) -> bytes:
        return Spool._read_file(file)[0]

    @staticmethod
    def _read_file(file: Path) -> tuple[bytes, float]:
        try:
            fd = os.open(file, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise ValueError("a link, not a file") from exc
            raise
        with os.fdopen(fd, "rb") as handle:
            info = os.fstat(handle.fileno())
            if not stat.S_ISREG(info.st_mode) or info.st_size > _MAX_BYTES:
                raise ValueError("not a spool entry (a special file, or too large)")
            return handle.read(), info.st_mtime

    @staticmethod
    def _set_aside(file: Path, why: BaseException) -> None:
        aside = file.with_name(f"{file.name}.unreadable")
        logger.warning("%s cannot be read (%s): set aside as %s", file, why, aside.name)
        try:
            os.replace(file, aside)
        except OSError as exc:
            logger.warning("could not set %s aside: %s", file, exc)


def _checked(name: str) -> str:
    if not _NAME.match(name):
        raise ValueError(f"not a spool entry name: {name!r}")
    return name


def _beside(suffix: str) -> str:
    if not _BESIDE.match(suffix) or suffix == _SUFFIX:
        raise ValueError(f"not a suffix for a file beside an entry: {suffix!r}")
    return suffix
