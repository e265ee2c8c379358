"""Which objects the repository's git directory C holds in its own object store, not through
an alternate (the tasks' stores, ``git_stores``): what every task's sandbox is shown.

Git cannot be asked this (it always reads C's alternates), so the files are read: a loose
object's path, and the sorted name table of each pack's index (version 2, what git writes).
Everything here blocks: callers run it in a thread.
"""

from __future__ import annotations

import contextlib
import logging
import mmap
import os
from collections.abc import Iterator
from pathlib import Path

logger = logging.getLogger(__name__)

_IDX_V2 = b"\377tOc\0\0\0\2"
_FANOUT = 8  # where the fan-out table starts in a version 2 index
_NAMES = _FANOUT + 256 * 4  # where the sorted names start


class OwnObjects:
    """C's own objects as they are on disk now: ``has`` answers from the loose folders and
    the packs' indexes, opened once (use as a context manager)."""

    def __init__(self, objects: Path, length: int) -> None:
        self._objects = objects
        self._size = length // 2
        self._stack = contextlib.ExitStack()
        self._indexes: list[mmap.mmap] = []

    def __enter__(self) -> OwnObjects:
        for idx in sorted((self._objects / "pack").glob("pack-*.idx")):
            mapped = self._stack.enter_context(_mapped(idx))
            if mapped is not None and mapped[:8] == _IDX_V2:
                self._indexes.append(mapped)
            elif mapped is not None:
                logger.warning("%s is not a version 2 pack index: not read", idx)
        return self

    def __exit__(self, *exc: object) -> None:
        self._indexes.clear()
        self._stack.close()

    def has(self, oid: str) -> bool:
        if os.path.lexists(self._objects / oid[:2] / oid[2:]):
            return True
        name = bytes.fromhex(oid)
        return any(index_has(index, name, self._size) for index in self._indexes)

    def packs_holding(self, oid: str) -> bool:
        """Whether one of the packs (not a loose file) holds it."""
        name = bytes.fromhex(oid)
        return any(index_has(index, name, self._size) for index in self._indexes)


def index_has(index: bytes | mmap.mmap, name: bytes, size: int) -> bool:
    """Whether a version 2 pack index lists ``name`` (pure): found by the fan-out table's
    range, then bisected in the sorted names."""
    first = name[0]
    low = _fanout(index, first - 1) if first else 0
    high = _fanout(index, first)
    while low < high:
        middle = (low + high) // 2
        at = _NAMES + middle * size
        found = index[at : at + size]
        if found == name:
            return True
        if found < name:
            low = middle + 1
        else:
            high = middle
    return False


def _fanout(index: bytes | mmap.mmap, byte: int) -> int:
    """How many names the index lists up to those starting with ``byte`` (pure)."""
    return int.from_bytes(index[_FANOUT + 4 * byte : _FANOUT + 4 * byte + 4], "big")


def index_names(index: bytes | mmap.mmap, size: int) -> Iterator[bytes]:
    """Every name a version 2 pack index lists (pure)."""
    count = _fanout(index, 255)
    for number in range(count):
        at = _NAMES + number * size
        yield bytes(index[at : at + size])


@contextlib.contextmanager
def _mapped(path: Path) -> Iterator[mmap.mmap | None]:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        yield None
        return
    try:
        if os.fstat(fd).st_size < _NAMES:
            yield None
            return
        with mmap.mmap(fd, 0, access=mmap.ACCESS_READ) as mapped:
            yield mapped
    finally:
        os.close(fd)
