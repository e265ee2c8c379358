"""What ``harness tasks`` needs from config.yaml (the tasks folder and the admins), remembered
so that a listing skips config.yaml's schema (pydantic models for every section, imported and
run: over half the command's start) while nothing that load read has changed.

An entry is written only after the full load succeeded without a warning, and is used only
when its key still matches: config.yaml's bytes, the path as given, the working folder,
``$HOME`` (paths in config.yaml are relative to or under them), the harness's version and its
config modules' files; and the role files still read the same and the tasks folder is not a
file. Any change misses and takes the full load, so a broken config.yaml gives the same
error as ever. Only a file store with no local ``path`` repositories is remembered: a NATS
store needs its settings, and a repository folder can stop being a git clone without
config.yaml changing. Entries live in the user's cache folder (``$XDG_CACHE_HOME/harness``,
else ``~/.cache/harness``), outside any project an agent works in; an unreadable or odd
entry is a miss, and a failed write loses nothing but the time."""

from __future__ import annotations

import hashlib
import json
import logging
import os
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple, TypedDict

from harness.atomic import write_atomic
from harness.version import __version__

if TYPE_CHECKING:
    from harness.project import Project


class _Entry(TypedDict):
    key: str
    tasks_dir: str
    admins: list[str]
    roles_dir: str
    roles: dict[str, str]  # file name -> sha256 of its bytes


# A NamedTuple, not a frozen dataclass: `dataclasses` (with `inspect`) costs a listing ~8 ms.
class ListingConfig(NamedTuple):
    """What the listing reads from a valid config.yaml."""

    tasks_dir: Path
    admins: tuple[str, ...]


class ConfigRead(NamedTuple):
    """config.yaml's bytes as read before a full load, and the key they give."""

    given: Path
    key: str


def cache_folder() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "harness"


def _entry_file(given: Path) -> Path:
    name = hashlib.sha256(os.path.abspath(given).encode("utf-8", "surrogateescape"))
    return cache_folder() / f"listing-{name.hexdigest()[:32]}.json"


def _key(given: Path, data: bytes) -> str:
    code = Path(__file__).resolve().parent.parent
    parts = [__version__, str(given), os.getcwd(), os.path.expanduser("~")]
    # The schema's own files: an upgrade or an edited checkout can change what is valid.
    with os.scandir(code / "config") as entries:
        files = sorted((e.name, e.stat()) for e in entries if e.name.endswith(".py"))
    files.append(("project.py", (code / "project.py").stat()))
    parts += [f"{name}:{st.st_mtime_ns}:{st.st_size}" for name, st in files]
    digest = hashlib.sha256("\0".join(parts).encode("utf-8", "surrogateescape"))
    digest.update(b"\0")
    digest.update(data)
    return digest.hexdigest()


def _roles(roles_dir: Path) -> dict[str, str] | None:
    try:
        return {
            path.name: hashlib.sha256(path.read_bytes()).hexdigest()
            for path in sorted(roles_dir.glob("*.md"))
        }
    except OSError:
        return None


def read_config(given: Path) -> ConfigRead | None:
    """config.yaml's key, from its bytes now (None: unreadable, the full load says why)."""
    file = given / "config.yaml" if given.is_dir() else given
    try:
        return ConfigRead(given, _key(given, file.read_bytes()))
    except OSError:
        return None


def cached(read: ConfigRead) -> ListingConfig | None:
    """The remembered listing config for config.yaml as read, or None (take the full load)."""
    try:
        raw = json.loads(_entry_file(read.given).read_bytes())
    except (OSError, ValueError):
        return None
    if not isinstance(raw, dict) or raw.get("key") != read.key:
        return None
    tasks_dir, admins = raw.get("tasks_dir"), raw.get("admins")
    roles_dir, roles = raw.get("roles_dir"), raw.get("roles")
    if not (
        isinstance(tasks_dir, str)
        and isinstance(roles_dir, str)
        and isinstance(admins, list)
        and all(isinstance(a, str) for a in admins)
        and isinstance(roles, dict)
    ):
        return None
    if Path(tasks_dir).is_file() or _roles(Path(roles_dir)) != roles:
        return None
    return ListingConfig(Path(tasks_dir), tuple(admins))


def load_listing_project(given: Path) -> Project:
    """The full load (``load_project``), remembered for the next listing when it is clean."""
    from harness.project import load_project

    read = read_config(given)
    warned = _Warned()
    root = logging.getLogger()
    root.addHandler(warned)
    try:
        project = load_project(given)
    finally:
        root.removeHandler(warned)
    if read is not None and not warned.seen:
        remember(read, project)
    return project


def remember(read: ConfigRead, project: Project) -> None:
    config = project.config
    if config.store.kind != "file" or any(
        repository.path is not None for repository in config.workspaces.repositories.values()
    ):
        return
    roles = _roles(config.roles_dir)
    if roles is None:
        return
    entry: _Entry = {
        "key": read.key,
        "tasks_dir": str(config.tasks_dir),
        "admins": list(config.slack.admins),
        "roles_dir": str(config.roles_dir),
        "roles": roles,
    }
    file = _entry_file(read.given)
    try:
        file.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        write_atomic(file, json.dumps(entry).encode("utf-8"), mode=0o600)
    except OSError:
        pass  # only the next listing's time is lost


class _Warned(logging.Handler):
    """Whether loading logged a warning: such a config.yaml is never remembered, so each
    listing still shows it."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.seen = False

    def emit(self, record: logging.LogRecord) -> None:
        self.seen = True
