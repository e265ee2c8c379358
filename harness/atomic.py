"""Writing a file so that readers and crashes see the old version or the new one, never a torn
one: a temp file beside it, synced, then renamed over it."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


def write_atomic(file: Path, data: bytes, *, mode: int = 0o644) -> os.stat_result:
    """Replace ``file`` with ``data``; returns the new file's stat. ``mode`` is set explicitly
    because mkstemp's 0600 would hide the file from teammates reading the same folder."""
    fd, tmp = tempfile.mkstemp(prefix=f".{file.name}.", suffix=".tmp", dir=file.parent)
    done = False
    try:
        try:
            os.fchmod(fd, mode)
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
            stat = os.fstat(fd)
        finally:
            os.close(fd)
        os.replace(tmp, file)
        done = True
    finally:
        if not done:
            Path(tmp).unlink(missing_ok=True)
    return stat
