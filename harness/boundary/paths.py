"""Paths into a folder an agent can write, as names, and why one is refused. Pure: nothing
here asks the disk (``files.py`` opens the names, by handle).

The rule: a path is a list of names below the folder. ``..`` is never one of them (a link
may make ``a/..`` anything), and an absolute path counts only when it lies lexically in the
folder; every refusal is a ``BoundaryError`` with what a tool call returns (code, message,
suggestion).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Literal

from harness.errors import HarnessError

# outside: the path leaves the folder (absolute elsewhere, ``..``); link: a name on the way
# is a symbolic link; not-a-folder: a name on the way is a file; not-a-file: the last name is
# a folder, a FIFO, a device or a socket; too-large: over the cap (or grew past it while
# read); missing: a name is not there; unreadable: the system refused (permissions, ...).
Reason = Literal[
    "outside", "link", "not-a-folder", "not-a-file", "too-large", "missing", "unreadable"
]

_CODES: dict[Reason, str] = {
    "outside": "PERMISSION_DENIED",
    "link": "PERMISSION_DENIED",
    "too-large": "LIMIT_EXCEEDED",
}


class BoundaryError(HarnessError):
    """A path in an agent's folder that the harness refuses, and why. ``path`` is the path as
    given, ``reason`` what is wrong, ``at`` the part of it where it went wrong; ``size`` and
    ``limit`` (bytes) for a file over its cap. ``code``, ``message`` and ``suggestion`` are
    what a tool call returns (``ToolError``'s shape)."""

    def __init__(
        self,
        path: str,
        reason: Reason,
        *,
        at: str = "",
        folder: str = "",
        detail: str = "",
        size: int | None = None,
        limit: int | None = None,
    ) -> None:
        self.path = path
        self.reason = reason
        self.at = at or path
        self.folder = folder
        self.detail = detail
        self.size = size
        self.limit = limit
        self.code = _CODES.get(reason, "INVALID_INPUT")
        message, suggestion = _explain(self)
        super().__init__(message, fix=suggestion)
        self.suggestion = suggestion


def _explain(error: BoundaryError) -> tuple[str, str]:
    path, at, reason = error.path, error.at, error.reason
    yours = f"your working folder {error.folder}" if error.folder else "your working folder"
    inside = "give the path of a file in your working folder (relative to it)"
    if reason == "outside":
        return (
            f"{path} is outside {yours}",
            "give a path inside your working folder, relative to it and without `..` "
            "(copy the file there first)",
        )
    if reason == "link":
        return (
            f"{path} goes through a symbolic link ({at}): links are not followed, since they "
            "can lead outside your working folder",
            "give the path of the file itself, or copy it into your working folder",
        )
    if reason == "not-a-folder":
        return f"{path} is not there: {at} is not a folder", inside
    if reason == "not-a-file":
        return f"{path} is {error.detail or 'not a regular file'}, not a file", inside
    if reason == "missing":
        return f"{path} is not there, not a file", inside
    if reason == "too-large":
        size = f"{error.size} bytes" if error.size is not None else "over the limit"
        return (
            f"{path} is {size}{error.detail}; at most {error.limit} bytes may be read",
            "use a smaller file",
        )
    return f"{path} cannot be read: {error.detail or 'refused'}", "check the path"


def split_relative(path: str) -> tuple[str, ...]:
    """The names of a relative path, in order (``.`` and empty ones dropped); BoundaryError
    ``outside`` for an absolute path or any ``..``, ``missing`` for no name at all."""
    if path.startswith("/"):
        raise BoundaryError(path, "outside")
    return _names(path)


def split_in_folder(
    folder: str | Path, path: str, *, also: Sequence[str | Path] = ()
) -> tuple[str, ...]:
    """The names of ``path`` below ``folder``: a relative path as it is, an absolute one when
    it lies (lexically: nothing on disk is asked) in ``folder`` or in one of ``also`` (other
    paths of the same folder). ``()`` is the folder itself. BoundaryError ``outside`` when it
    lies elsewhere or has a ``..``."""
    where = str(folder)
    names = _names(path, where, empty=True)
    if not path.startswith("/"):
        return names
    for root in (folder, *also):
        prefix = tuple(name for name in os.path.normpath(root).split("/") if name)
        if names[: len(prefix)] == prefix:
            return names[len(prefix) :]
    raise BoundaryError(path, "outside", folder=where)


def _names(path: str, folder: str = "", *, empty: bool = False) -> tuple[str, ...]:
    if "\0" in path:
        raise BoundaryError(path, "missing", detail="a NUL character")
    names = tuple(name for name in path.split("/") if name not in ("", "."))
    if ".." in names:
        raise BoundaryError(path, "outside", at="..", folder=folder)
    if not names and not empty:
        raise BoundaryError(path, "missing")
    return names
