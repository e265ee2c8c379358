"""Copying the object files a task's sandbox wrote in its private folder P into the task's
store in C (``git_stores``), for ``git_settle``: each checked, never overwriting anything. A
loose object is checked while it is copied (its name is the hash of its content); a pack is
staged beside the store's packs for ``git verify-pack``, then linked into place. A file the
agent planted under an object's name never stands in for that object in C. Blocking: the
settling runs each step in one thread hop.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import stat
import tempfile
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO, Literal

from harness.workspaces.files import remove_tree
from harness.workspaces.git_files import open_regular, read_regular
from harness.workspaces.git_own import OwnObjects, index_names
from harness.workspaces.git_stores import ensure_store

logger = logging.getLogger(__name__)

_HEX = re.compile(r"[0-9a-f]+")
_PACK = re.compile(r"pack-([0-9a-f]+)\.(pack|idx)")
_OBJECT_TYPES = (b"blob", b"tree", b"commit", b"tag")
_CHUNK = 1 << 16

Copied = Literal["copied", "present", "invalid"]


def bring_loose(
    common: Path, slug: str, objects: Path, fmt: str, length: int
) -> tuple[Path, list[Path], dict[Copied, int]] | None:
    """The task's store in C made, and the loose objects of P's ``objects`` that it and C's
    own store lack copied into it, each checked; the store, P's packs and the counts so far.
    None when P has no objects folder."""
    target = ensure_store(common, slug)
    if not os.path.isdir(objects):
        return None
    loose, packs = _object_files(objects, length)
    owned = _owned(common, [name for _, name in loose], length)
    counts: dict[Copied, int] = {"copied": 0, "present": 0, "invalid": 0}
    for source, name in loose:
        if name in owned:
            counts["present"] += 1
            continue
        outcome = _copy_loose(source, target / name, fmt)
        counts[outcome] += 1
        if outcome == "invalid":
            logger.warning("task %s: %s is not a valid object, not copied", slug, source)
    return target, packs, counts


def _owned(common: Path, names: list[str], length: int) -> set[str]:
    """Those of the loose objects ``xx/<rest>`` that C's own store has (blocking)."""
    with OwnObjects(common / "objects", length) as own:
        return {name for name in names if own.has(name.replace("/", ""))}


def _object_files(objects: Path, length: int) -> tuple[list[tuple[Path, str]], list[Path]]:
    """P's loose object files (path, ``xx/<rest>``) and its packs (the ``.pack`` of each
    pack that has an ``.idx``); regular files only."""
    loose: list[tuple[Path, str]] = []
    for folder in _entries(objects):
        if not (len(folder.name) == 2 and _HEX.fullmatch(folder.name)):
            continue
        if not folder.is_dir(follow_symlinks=False):
            continue
        for file in _entries(Path(folder.path)):
            rest = file.name
            if len(rest) == length - 2 and _HEX.fullmatch(rest) and _regular(file):
                loose.append((Path(file.path), f"{folder.name}/{rest}"))
    files = {
        entry.name: entry for entry in _entries(objects / "pack") if _PACK.fullmatch(entry.name)
    }
    packs = [
        Path(entry.path)
        for name, entry in sorted(files.items())
        if name.endswith(".pack")
        and _regular(entry)
        and (idx := files.get(name.removesuffix(".pack") + ".idx")) is not None
        and _regular(idx)
    ]
    return loose, packs


def _entries(folder: Path) -> Iterator[os.DirEntry[str]]:
    """The entries of one of P's folders; none when it is not a plain folder (an agent's
    link to another task's store lists nothing)."""
    try:
        if not stat.S_ISDIR(os.lstat(folder).st_mode):
            return
        with os.scandir(folder) as entries:
            yield from entries
    except (FileNotFoundError, NotADirectoryError):
        return


def _regular(entry: os.DirEntry[str]) -> bool:
    return entry.is_file(follow_symlinks=False)


def _copy_loose(source: Path, target: Path, fmt: str) -> Copied:
    """Copy one loose object to ``target`` unless it is there: written under a temporary
    name in the target's folder, checked, then linked into place (a link never replaces a
    file, so an object another process wrote meanwhile stays)."""
    if os.path.lexists(target):
        return "present"
    with open_regular(source) as src:
        if src is None:
            return "invalid"
        target.parent.mkdir(exist_ok=True)
        fd, temp = tempfile.mkstemp(dir=target.parent, prefix="tmp_obj_")
        try:
            with os.fdopen(fd, "wb") as out:
                valid = _copy_checking(src, out, fmt, target.parent.name + target.name)
            if not valid:
                return "invalid"
            os.chmod(temp, 0o444)  # as git leaves its objects
            return _link(temp, target)
        finally:
            os.unlink(temp)


def _copy_checking(src: BinaryIO, out: BinaryIO, fmt: str, name: str) -> bool:
    """Copy a loose object's bytes while inflating them: true when they are one zlib stream of
    ``<type> <size>\\0<content>`` whose hash is ``name``. Inflated a bounded piece at a time,
    so a small file that inflates to gigabytes costs time, never memory."""
    inflater = zlib.decompressobj()
    hasher = hashlib.new(fmt)
    header = bytearray()
    size: int | None = None
    content = 0

    def take(data: bytes) -> bool:
        """Hash and count inflated bytes; false once the header is malformed."""
        nonlocal size, content
        hasher.update(data)
        if size is None:
            header.extend(data)
            end = header.find(b"\0")
            if end < 0:
                return len(header) <= 64
            kind, _, length = bytes(header[:end]).partition(b" ")
            if kind not in _OBJECT_TYPES or not length.isdigit():
                return False
            size, data = int(length), bytes(header[end + 1 :])
        content += len(data)
        return True

    try:
        for chunk in iter(lambda: src.read(_CHUNK), b""):
            out.write(chunk)
            pending = chunk
            while pending:
                if inflater.eof:
                    return False  # bytes after the object
                data = inflater.decompress(pending, _CHUNK)
                pending = inflater.unconsumed_tail
                if not take(data):
                    return False
        if not take(inflater.flush()):
            return False
    except zlib.error:
        return False
    done = inflater.eof and not inflater.unused_data
    return done and size == content and hasher.hexdigest() == name


def stage_pack(pack: Path, idx: Path, target: Path) -> tuple[Path, bool] | None:
    """A pack and its index copied into a new temporary folder in the pack folder
    ``target`` (git looks at its ``*.idx`` files only), to be verified there; that folder and
    whether both were regular files. None when ``target`` has the pack already."""
    if os.path.lexists(target / idx.name):
        return None
    target.mkdir(parents=True, exist_ok=True)
    temp = Path(tempfile.mkdtemp(dir=target, prefix="tmp_pack_"))
    try:
        for file in (pack, idx):
            if not _copy_regular(file, temp / file.name):
                return temp, False
    except BaseException:
        remove_tree(temp)
        raise
    return temp, True


def place_pack(
    common: Path, slug: str, pack: Path, temp: Path, target: Path, length: int
) -> Copied:
    """A pack ``stage_pack`` put in ``temp``, verified since, linked into ``target``, the
    pack first (git finds a pack by its index); into C's own pack folder instead when it
    holds an object of C's own store."""
    idx = pack.with_suffix(".idx")
    if _overlaps(common, temp / idx.name, length):
        target = common / "objects" / "pack"
        logger.info("task %s: %s holds objects of the repository's own", slug, pack)
    _link(str(temp / pack.name), target / pack.name)
    return _link(str(temp / idx.name), target / idx.name)


def _overlaps(common: Path, idx: Path, length: int) -> bool:
    """Whether a verified pack's index names an object of C's own store (blocking)."""
    data = read_regular(idx, None) or b""
    with OwnObjects(common / "objects", length) as own:
        return any(own.has(name.hex()) for name in index_names(data, length // 2))


def _copy_regular(source: Path, target: Path) -> bool:
    with open_regular(source) as src:
        if src is None:
            return False
        with target.open("xb") as out:
            while chunk := src.read(_CHUNK):
                out.write(chunk)
    os.chmod(target, 0o444)
    return True


def _link(temp: str, target: Path) -> Copied:
    try:
        os.link(temp, target)
    except FileExistsError:
        return "present"
    return "copied"
