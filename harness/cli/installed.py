"""What is installed, read from the distributions' metadata folders on ``sys.path`` the way
``importlib.metadata`` finds them, without importing it: its import (email, zipfile, csv,
importlib.resources) is most of what ``harness --help`` and ``--version`` would cost. The
plug-ins' commands (an entry point group) and this distribution's version come out the same;
where ``sys.path`` holds what only ``importlib.metadata`` reads (a zip file, an egg, another
finder of distributions), it is asked instead."""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Callable
from pathlib import Path

from harness.version import DISTRIBUTION, __version__

# importlib.metadata's entry point syntax: ``module[:attr.attr] [extras]``.
_ENTRY_POINT = re.compile(
    r"(?P<module>[\w.]+)\s*(:\s*(?P<attr>[\w.]+)\s*)?((?P<extras>\[.*\])\s*)?$"
)
_METADATA_SUFFIXES = (".dist-info", ".egg-info")


def _normalize(name: str) -> str:
    """A distribution's name as importlib.metadata compares them (PEP 503, dashes as
    underscores)."""
    return re.sub(r"[-_.]+", "-", name).lower().replace("-", "_")


def _plain_layout() -> bool:
    """Whether every distribution is a metadata folder in a folder on ``sys.path``, found by
    the standard path finder alone: then a scan of those folders finds what
    importlib.metadata would."""
    from importlib.machinery import PathFinder

    for finder in sys.meta_path:
        if finder is not PathFinder and getattr(finder, "find_distributions", None):
            return False
    for entry in sys.path:
        root = os.fspath(entry) or "."
        if root.lower().endswith(".egg") or os.path.isfile(root):
            return False
    return True


def _distributions() -> list[Path] | None:
    """Each distribution's metadata folder, the first of each name, in ``sys.path`` order;
    None when the layout is one only importlib.metadata reads."""
    if not _plain_layout():
        return None
    seen: dict[str, Path] = {}
    for entry in sys.path:
        root = os.fspath(entry) or "."
        try:
            children = os.listdir(root)
        except OSError:  # a missing folder, or a path hook's marker: nothing installed there
            continue
        for child in children:
            if child.lower().endswith(_METADATA_SUFFIXES):
                name = _normalize(child.rpartition(".")[0].partition("-")[0])
                seen.setdefault(name, Path(root, child))
    return list(seen.values())


def _read(folder: Path, name: str) -> str | None:
    try:
        return folder.joinpath(name).read_text(encoding="utf-8")
    except (FileNotFoundError, IsADirectoryError, NotADirectoryError, PermissionError):
        return None


def entry_points(group: str) -> list[tuple[str, str]]:
    """The (name, value) of each entry point in ``group``, in importlib.metadata's order."""
    folders = _distributions()
    if folders is None:
        from importlib.metadata import entry_points as metadata_entry_points

        return [(point.name, point.value) for point in metadata_entry_points(group=group)]
    found: list[tuple[str, str]] = []
    for folder in folders:
        section = None
        for line in (_read(folder, "entry_points.txt") or "").splitlines():
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            if line.startswith("[") and line.endswith("]"):
                section = line.strip("[]")
            elif section == group:
                name, value = line.split("=", 1)
                found.append((name.strip(), value.strip()))
    return found


def load(value: str) -> Callable[..., object]:
    """What an entry point's value names: ``module:attr`` imported."""
    match = _ENTRY_POINT.match(value)
    if match is None:
        raise ValueError(f"not an entry point: {value!r}")
    # By the import statement's path (importlib.import_module bypasses it): then
    # ``python -X importtime`` shows what a plug-in costs a command's start.
    __import__(match.group("module"))
    loaded: object = sys.modules[match.group("module")]
    for attr in filter(None, (match.group("attr") or "").split(".")):
        loaded = getattr(loaded, attr)
    if not callable(loaded):
        raise TypeError(f"entry point {value!r} names {loaded!r}, which cannot be called")
    return loaded


def version(distribution: str, default: str) -> str:
    """The installed ``distribution``'s version (its metadata's ``Version``), else
    ``default`` (a source tree on ``sys.path``, never installed)."""
    folders = _distributions()
    wanted = _normalize(distribution)
    for folder in folders or ():
        if _normalize(folder.name.rpartition(".")[0].partition("-")[0]) != wanted:
            continue
        text = _read(folder, "METADATA") or _read(folder, "PKG-INFO") or ""
        for line in text.partition("\n\n")[0].splitlines():  # the headers, not the README
            key, colon, written = line.partition(":")
            if colon and key.strip().lower() == "version":
                return written.strip()
        break  # no Version header where importlib.metadata would read one: ask it
    else:
        if folders is not None:
            return default
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as metadata_version

    try:
        return metadata_version(distribution)
    except PackageNotFoundError:
        return default


def version_line() -> str:
    """What ``harness --version`` prints: the version installed, else the source's."""
    return f"harness {version(DISTRIBUTION, __version__)} ({DISTRIBUTION})"
