"""A folder of small JSON files, one per thing a process still owes someone, that outlives the
process: what the harness owes its workers (kills) and expects of them (late outcomes), and
what a stopping worker could not hand NATS (its agents' last events).

Each file is written atomically (a reader or a crash sees the old version or the new one),
read without following a link, and removed once what it holds was delivered. The folder is
the harness's own (never an agent's): made private to this user. An entry that cannot be read
is moved aside and named in the log, never taken for something owed. File work runs in worker
threads; nothing here blocks the event loop.
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

    async def drop(self, name: str) -> None:
        """Forgets ``name`` (delivered); a disk that refuses is logged, and the entry is
        delivered again later, which its readers take as a repeat."""
        try:
            await asyncio.to_thread((self.folder / f"{_checked(name)}{_SUFFIX}").unlink, True)
        except OSError as exc:
            logger.warning("could not remove %s from %s: %s", name, self.folder, exc)

    async def entries(self) -> list[tuple[str, dict[str, Any]]]:
        """(name, data) of every entry, oldest first."""
        return await asyncio.to_thread(self._entries)

    def _put(self, name: str, encoded: bytes) -> None:
        self.folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        write_atomic(self.folder / f"{name}{_SUFFIX}", encoded, mode=0o600)

    def _entries(self) -> list[tuple[str, dict[str, Any]]]:
        try:
            files = [
                entry
                for entry in os.scandir(self.folder)
                if entry.name.endswith(_SUFFIX) and _NAME.match(entry.name[: -len(_SUFFIX)])
            ]
        except FileNotFoundError:
            return []
        found: list[tuple[float, str, dict[str, Any]]] = []
        for entry in files:
            name = entry.name[: -len(_SUFFIX)]
            try:
                data, modified = self._read(Path(entry.path))
            except FileNotFoundError:  # delivered meanwhile
                continue
            except (OSError, ValueError) as exc:
                self._set_aside(Path(entry.path), exc)
                continue
            found.append((modified, name, data))
        return [(name, data) for _, name, data in sorted(found, key=lambda f: (f[0], f[1]))]

    @staticmethod
    def _read(file: Path) -> tuple[dict[str, Any], float]:
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
            data = json.loads(handle.read().decode("utf-8"))
        if not isinstance(data, dict):
            raise ValueError("not a JSON object")
        return data, info.st_mtime

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
