"""Files in a folder an agent can write (its working folder, its sandbox's folders), as the
harness reads and writes them: by handle, never by name.

The rule: the folder's own path is the harness's, everything below it the agent's, and the
agent may swap any name below it for a link at any moment. So a path is split into names
first (pure: no ``..``, an absolute path only lexically inside the folder), then opened one
name at a time relative to the handle of the folder before it (``dir_fd``), with
``O_NOFOLLOW``: a link anywhere is refused, never followed, and what a later swap changes is
no longer looked at. A file is checked on the handle that is read (``fstat``: a regular
file, within the cap) and read from that same handle, with a cap on the bytes too; it is
opened for reading only once known to be a regular file, so a FIFO or a device is never
opened (nothing blocks). Writes make folders a name at a time, then a temp file in the
target folder renamed over the name (atomic; a link there is replaced, not followed).

All blocking: callers run these in a worker thread (``asyncio.to_thread``).
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import secrets
import stat
from collections.abc import Collection, Generator, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from harness.boundary.paths import BoundaryError, Reason, split_in_folder, split_relative

__all__ = [
    "BoundaryError",
    "Folder",
    "Kind",
    "Reason",
    "entry_kind",
    "make_folders",
    "read_file",
    "read_link_file",
    "split_in_folder",
    "split_relative",
    "walk_stats",
    "write_file",
]

logger = logging.getLogger(__name__)

# Folders on the way: a handle that only names them (no read permission needed), and
# refuses a link (O_NOFOLLOW with O_DIRECTORY fails on one).
_FOLDER = os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
# A folder whose names are listed.
_LISTED = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
# The last name, before it is known to be a regular file: a handle on the entry itself
# (a link is opened as the link, and seen as one by fstat); nothing is opened for reading.
_ENTRY = os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC
# Reading a checked file: never blocks, never becomes a controlling terminal.
_READ = os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
# A new file of ours: never an existing one, never through a link.
_CREATE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
_CHUNK = 1 << 16
# Deeper than this, a walk stops descending: each level holds a handle open.
MAX_DEPTH = 200

# What is at a name, not followed (``entry_kind``).
Kind = Literal["file", "folder", "link", "other", "missing"]


# --------------------------------------------------------------------------- handles


@dataclass(frozen=True)
class Folder:
    """An open handle on a folder an agent can write; ``path`` only says where it is. Close
    it (``with``)."""

    fd: int
    path: Path

    @classmethod
    def open(cls, path: Path) -> Folder:
        """The folder at ``path``, links in ``path`` itself followed: that path is the
        harness's own. BoundaryError ``missing`` / ``not-a-folder`` when it is not one."""
        try:
            fd = os.open(path, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
        except FileNotFoundError:
            raise BoundaryError(str(path), "missing") from None
        except NotADirectoryError:
            raise BoundaryError(str(path), "not-a-folder") from None
        except OSError as exc:
            raise BoundaryError(str(path), "unreadable", detail=exc.strerror or str(exc)) from None
        return cls(fd, path)

    def close(self) -> None:
        os.close(self.fd)

    def __enter__(self) -> Folder:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def read_file(folder: Folder, names: Sequence[str], max_bytes: int, *, shown: str = "") -> bytes:
    """The bytes of the regular file at ``names`` below ``folder``, at most ``max_bytes``:
    exactly what the checked handle reads. BoundaryError when a name on the way is a link or
    missing, the last is not a regular file, or it is (or grows while read) over the cap."""
    shown = shown or "/".join(names)
    if not names:
        raise BoundaryError(shown, "not-a-file", detail="the folder itself")
    parent = _open_folders(folder.fd, names[:-1], shown)
    try:
        fd = _open_regular(parent, names, shown, max_bytes)
    finally:
        os.close(parent)
    try:
        return _read_capped(fd, shown, max_bytes)
    finally:
        os.close(fd)


# git's link files (a worktree's `.git`, an admin folder's `commondir` and `gitdir`) hold
# one path each.
LINK_FILE_MAX = 4096


def read_link_file(path: Path) -> str | None:
    """The text of one of git's small link files at ``path`` (whose folder is the harness's
    own path), stripped: read by handle, no link followed, never blocking; None when it is
    anything but a small regular UTF-8 file."""
    try:
        with Folder.open(path.parent) as folder:
            return read_file(folder, (path.name,), LINK_FILE_MAX).decode("utf-8").strip()
    except (BoundaryError, OSError, UnicodeDecodeError):
        return None


def entry_kind(folder: Folder, names: Sequence[str]) -> Kind:
    """What is at ``names`` below ``folder``, the last name not followed (``missing`` also
    when the way there is not plain folders)."""
    if not names:
        return "folder"
    try:
        parent = _open_folders(folder.fd, names[:-1], "/".join(names))
    except BoundaryError:
        return "missing"
    try:
        mode = os.stat(names[-1], dir_fd=parent, follow_symlinks=False).st_mode
    except OSError:
        return "missing"
    finally:
        os.close(parent)
    if stat.S_ISLNK(mode):
        return "link"
    if stat.S_ISDIR(mode):
        return "folder"
    return "file" if stat.S_ISREG(mode) else "other"


def make_folders(folder: Folder, names: Sequence[str], *, mode: int = 0o755) -> None:
    """Makes the folders ``names`` below ``folder``, a name at a time, none through a link;
    a link or a file where one of them belongs is removed (the link itself, never what it
    leads to) and the folder made in its place."""
    os.close(_make_folders(folder.fd, names, "/".join(names), mode))


def write_file(folder: Folder, names: Sequence[str], content: bytes, *, mode: int = 0o644) -> None:
    """Writes ``content`` as the file ``names`` below ``folder``, atomically: a temp file in
    the target folder (made as ``make_folders`` does) renamed over the name, so a link there
    is replaced, never followed. BoundaryError ``not-a-file`` when a folder is in its place."""
    shown = "/".join(names)
    if not names:
        raise BoundaryError(shown, "not-a-file", detail="the folder itself")
    parent = _make_folders(folder.fd, names[:-1], shown, 0o755)
    temporary = f".tmp-{secrets.token_hex(8)}"
    try:
        fd = os.open(temporary, _CREATE, mode, dir_fd=parent)
        try:
            os.fchmod(fd, mode)  # exactly this, whatever the umask
            view = memoryview(content)
            while view:
                view = view[os.write(fd, view) :]
        finally:
            os.close(fd)
        try:
            os.replace(temporary, names[-1], src_dir_fd=parent, dst_dir_fd=parent)
        except IsADirectoryError:
            raise BoundaryError(shown, "not-a-file", detail="a folder") from None
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary, dir_fd=parent)
        raise
    finally:
        os.close(parent)


def walk_stats(
    folder: Folder, *, skip: Collection[str] = ()
) -> Generator[os.stat_result, None, None]:
    """The stat of the folder and of everything below it (links not followed, so neither
    listed through nor descended into); ``skip``: names left out at the top. A folder
    removed or swapped for a link while walked is passed over."""
    # Each handle is closed by the walk that owns it, also when the caller stops early.
    yield from _walk(os.open(".", _LISTED, dir_fd=folder.fd), skip, 0)


def _walk(fd: int, skip: Collection[str], depth: int) -> Iterator[os.stat_result]:
    try:
        if depth == 0:
            yield os.fstat(fd)
        with os.scandir(fd) as listing:
            entries = [entry for entry in listing if entry.name not in skip]
        for entry in entries:
            try:
                info = entry.stat(follow_symlinks=False)
            except OSError:  # gone while walked
                continue
            yield info
            if not stat.S_ISDIR(info.st_mode):
                continue
            if depth >= MAX_DEPTH:
                logger.warning("not walking below %d levels in an agent's folder", MAX_DEPTH)
                continue
            try:
                child = os.open(entry.name, _LISTED, dir_fd=fd)
            except OSError:  # gone, or swapped for a link or a file
                continue
            yield from _walk(child, (), depth + 1)
    finally:
        os.close(fd)


# --------------------------------------------------------------------------- the steps


def _open_folders(base: int, names: Sequence[str], shown: str) -> int:
    """A handle on the folder ``names`` below ``base``, opened a name at a time."""
    fd = os.dup(base)
    try:
        for n, name in enumerate(names):
            try:
                child = os.open(name, _FOLDER, dir_fd=fd)
            except OSError as exc:
                raise _refused(fd, name, names[: n + 1], shown, exc) from None
            os.close(fd)
            fd = child
    except BaseException:
        os.close(fd)
        raise
    return fd


def _make_folders(base: int, names: Sequence[str], shown: str, mode: int) -> int:
    fd = os.dup(base)
    try:
        for name in names:
            child = _made_folder(fd, name, mode)
            os.close(fd)
            fd = child
    except OSError as exc:
        os.close(fd)
        raise BoundaryError(shown, "unreadable", detail=exc.strerror or str(exc)) from exc
    except BaseException:
        os.close(fd)
        raise
    return fd


def _made_folder(parent: int, name: str, mode: int) -> int:
    for _ in range(3):  # the agent may race us: each round makes the folder or clears the way
        with contextlib.suppress(FileExistsError):
            os.mkdir(name, mode, dir_fd=parent)
        try:
            return os.open(name, _FOLDER, dir_fd=parent)
        except FileNotFoundError:
            continue
        except OSError:
            if stat.S_ISDIR(os.stat(name, dir_fd=parent, follow_symlinks=False).st_mode):
                raise
            os.unlink(name, dir_fd=parent)  # a link or a file: removed, never followed
    raise OSError(errno.EBUSY, f"{name} kept changing while made")


def _open_regular(parent: int, names: Sequence[str], shown: str, max_bytes: int) -> int:
    """A handle for reading the regular file ``names[-1]`` in ``parent``, within the cap."""
    name = names[-1]
    try:
        entry = os.open(name, _ENTRY, dir_fd=parent)
    except OSError as exc:
        raise _refused(parent, name, names, shown, exc) from None
    try:
        info = os.fstat(entry)
        _check_regular(info, names, shown, max_bytes)
        fd = _reopen(entry, parent, name, shown)
        opened = os.fstat(fd)
        if (opened.st_dev, opened.st_ino) != (info.st_dev, info.st_ino):
            os.close(fd)  # swapped between the two opens: not the file that was checked
            raise BoundaryError(shown, "unreadable", detail="it changed while opened")
        return fd
    finally:
        os.close(entry)


def _check_regular(info: os.stat_result, names: Sequence[str], shown: str, cap: int) -> None:
    if stat.S_ISLNK(info.st_mode):
        raise BoundaryError(shown, "link", at="/".join(names))
    if stat.S_ISDIR(info.st_mode):
        raise BoundaryError(shown, "not-a-file", detail="a folder")
    if not stat.S_ISREG(info.st_mode):
        raise BoundaryError(shown, "not-a-file", detail="a FIFO, a device or a socket")
    if info.st_size > cap:
        raise BoundaryError(shown, "too-large", size=info.st_size, limit=cap)


def _reopen(entry: int, parent: int, name: str, shown: str) -> int:
    """The checked entry opened for reading: through its handle where /proc shows it (the
    very file, whatever its name leads to now), else by name without following a link."""
    try:
        return os.open(f"/proc/self/fd/{entry}", _READ)
    except FileNotFoundError:
        pass
    except OSError as exc:
        raise BoundaryError(shown, "unreadable", detail=exc.strerror or str(exc)) from None
    try:
        return os.open(name, _READ | os.O_NOFOLLOW, dir_fd=parent)
    except OSError as exc:
        raise BoundaryError(shown, "unreadable", detail=exc.strerror or str(exc)) from None


def _read_capped(fd: int, shown: str, max_bytes: int) -> bytes:
    chunks: list[bytes] = []
    total = 0
    while True:
        try:
            chunk = os.read(fd, min(_CHUNK, max_bytes + 1 - total))
        except OSError as exc:
            raise BoundaryError(shown, "unreadable", detail=exc.strerror or str(exc)) from None
        if not chunk:
            return b"".join(chunks)
        total += len(chunk)
        if total > max_bytes:  # it grew while read: refused, never cut short
            raise BoundaryError(shown, "too-large", detail=" (it grew while read)", limit=max_bytes)
        chunks.append(chunk)


def _refused(
    parent: int, name: str, names: Sequence[str], shown: str, exc: OSError
) -> BoundaryError:
    """Why opening ``name`` in ``parent`` failed, said as the path's problem. The open's
    failure is what refuses; the lstat here only names the reason."""
    at = "/".join(names)
    if isinstance(exc, FileNotFoundError):
        return BoundaryError(shown, "missing", at=at)
    try:
        mode = os.stat(name, dir_fd=parent, follow_symlinks=False).st_mode
    except FileNotFoundError:  # gone since: being swapped
        return BoundaryError(shown, "missing", at=at)
    except OSError:
        mode = 0
    if stat.S_ISLNK(mode):
        return BoundaryError(shown, "link", at=at)
    if stat.S_ISDIR(mode):  # not a folder when opened, one now: it is being swapped
        return BoundaryError(shown, "unreadable", at=at, detail="it changed while opened")
    if isinstance(exc, NotADirectoryError):
        return BoundaryError(shown, "not-a-folder", at=at)
    return BoundaryError(shown, "unreadable", at=at, detail=exc.strerror or str(exc))
