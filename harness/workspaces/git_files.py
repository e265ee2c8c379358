"""Small file helpers of the git views and stores: reading a file only when it is a regular
one (never through a link, never blocking on a FIFO an agent left) and replacing a file whole.
All blocking: callers run them in threads."""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO


@contextlib.contextmanager
def open_regular(path: Path) -> Iterator[BinaryIO | None]:
    """The file opened for reading when it is a regular file; None for anything else
    (missing, a symlink, a FIFO that would block the read...). Its folder is opened without
    following a link too: an agent can replace a folder of P (``objects/pack``,
    ``objects/xx``) by a link to another task's store, whose files must never be taken as
    this task's. The folders above are the harness's (P, or a bind the agent cannot move)."""
    try:
        folder = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except OSError:
        yield None
        return
    try:
        fd = os.open(path.name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=folder)
    except OSError:
        yield None
        return
    finally:
        os.close(folder)
    with os.fdopen(fd, "rb") as file:
        yield file if stat.S_ISREG(os.fstat(fd).st_mode) else None


def read_regular(path: Path, limit: int | None) -> bytes | None:
    """The content of a regular file (up to ``limit`` bytes); None for anything else."""
    with open_regular(path) as file:
        if file is None:
            return None
        return file.read() if limit is None else file.read(limit)


def write_file(path: Path, data: bytes) -> None:
    """Replace ``path`` whole: written beside it, then renamed over it."""
    fd, temp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data)
        os.chmod(temp, 0o644)
        os.replace(temp, path)
    except BaseException:
        os.unlink(temp)
        raise
