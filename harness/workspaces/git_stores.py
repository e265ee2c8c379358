"""Where the repository keeps its tasks' objects: one object store per task, apart from its
own object store, so that no task's sandbox is ever shown another task's objects.

A task's store is ``C/harness/tasks/<name>`` (C: the repository's git directory; the name is
the task's slug, or a spare's placeholder until a task adopts it). Only the harness writes
there: what a task's agent committed in its sandbox is settled into it (``git_settle``),
checked. C reaches every store through one alternate of its own object store,
``../harness/objects`` (the pool, an object store holding nothing), whose alternates list the
stores: C stays complete (``git log --all``, ``fsck``, ``gc``, pushes of the task branches),
while a sandbox, shown a pool of its own (``git_shown``), reaches its task's store alone. A
``git gc`` in C packs its own objects only (``repack -l``) and prunes none of the stores.

Stores live in C, not beside the workspaces, so the repository holds its branches' objects
wherever the harness's folders go. ``C/harness/own`` shows C's own objects without the pool,
for git the harness runs for one task (``store_env``). Everything here blocks: callers run
it in a thread.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
from collections.abc import Iterable, Iterator
from pathlib import Path

from harness.workspaces.files import remove_tree
from harness.workspaces.git_files import read_regular, write_file

logger = logging.getLogger(__name__)

HARNESS = "harness"  # the harness's own folder in C
STORES = "tasks"  # under it: the tasks' stores
POOL = "objects"  # under it: the object store whose alternates are the stores
OWN = "own"  # under it: C's own objects without the pool (``own_view``)
# The pool as an alternate of C's objects (git reads a relative entry from the objects folder).
POOL_ENTRY = f"../{HARNESS}/{POOL}"


def store_path(common: Path, name: str) -> Path:
    """Where task (or spare) ``name`` keeps its objects in C (pure)."""
    return common / HARNESS / STORES / name


def pool_path(common: Path) -> Path:
    return common / HARNESS / POOL


def with_entry(alternates: str, entry: str) -> str:
    """An alternates file's text with ``entry`` on a line of its own, added at the end when
    it is not there; the other lines kept as they are (pure)."""
    lines = alternates.splitlines()
    if entry in (line.strip() for line in lines):
        return alternates
    return "".join(f"{line}\n" for line in (*lines, entry))


def pool_alternates(names: Iterable[str]) -> str:
    """The pool's alternates: every store, relative to the pool (pure)."""
    return "".join(f"../{STORES}/{name}\n" for name in sorted(names))


def store_env(common: Path, name: str) -> dict[str, str]:
    """The environment that makes git the harness runs over task ``name``'s worktree write
    its objects (a commit of what the agent left) into the task's store, not into C's own,
    which every task's sandbox is shown; it reads what the task's sandbox reads, C's own
    objects and the task's store, never the pool: git writes no object it can read, and one
    left in another task's store would be out of this task's sight (pure)."""
    return {
        "GIT_OBJECT_DIRECTORY": str(store_path(common, name)),
        "GIT_ALTERNATE_OBJECT_DIRECTORIES": alternate_entry(common / HARNESS / OWN),
    }


def alternate_entry(path: Path) -> str:
    """One entry of ``GIT_ALTERNATE_OBJECT_DIRECTORIES``, which ``:`` separates: quoted
    C-style when the path has a colon or starts with a quote (pure)."""
    text = str(path)
    if ":" not in text and not text.startswith('"'):
        return text
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def ensure_store(common: Path, name: str) -> Path:
    """Task ``name``'s store, made when missing, with C reaching it."""
    store = store_path(common, name)
    with locked(common):
        store.mkdir(parents=True, exist_ok=True)
        _relist(common)
    return store


def rename_store(common: Path, old: str, new: str) -> None:
    """A spare's store becomes task ``new``'s (its sandbox, bound to the folder, keeps it).
    The pool lists both names a moment, so C never misses an object meanwhile."""
    with locked(common):
        source, target = store_path(common, old), store_path(common, new)
        if not os.path.lexists(source):
            target.mkdir(parents=True, exist_ok=True)
        else:
            os.rename(source, target)
        _relist(common)


def drop_store(common: Path, name: str) -> None:
    """Removes a spare's store (never a task's: its objects are its branch's). C stops
    listing it first, so no git in C looks for a store that is gone."""
    with locked(common):
        store = store_path(common, name)
        if not os.path.lexists(store):
            return
        _relist(common, leaving=name)
        remove_tree(store)


def store_names(common: Path) -> list[str]:
    try:
        with os.scandir(common / HARNESS / STORES) as entries:
            return [e.name for e in entries if e.is_dir(follow_symlinks=False)]
    except FileNotFoundError:
        return []


def _relist(common: Path, leaving: str | None = None) -> None:
    """The pool's alternates made from the stores there are, and C's own alternates made
    to name the pool, each only when it differs (a rewrite is a rename, as git does)."""
    pool = pool_path(common)
    (pool / "info").mkdir(parents=True, exist_ok=True)
    names = [name for name in store_names(common) if name != leaving]
    _write_if_changed(pool / "info" / "alternates", pool_alternates(names))
    own = common / "objects" / "info" / "alternates"
    own.parent.mkdir(parents=True, exist_ok=True)
    before = read_regular(own, limit=None)
    text = before.decode("utf-8", "surrogateescape") if before is not None else ""
    if before is None and os.path.lexists(own):
        raise OSError(f"{own} is not a regular file")
    _write_if_changed(own, with_entry(text, POOL_ENTRY))
    _own_view(common, text)


def _own_view(common: Path, alternates: str) -> None:
    """``C/harness/own``: C's own objects without the pool, for ``store_env`` (git reads
    C's alternates whenever it reads C's objects): links to C's pack and loose folders, and
    C's own alternates but the pool, made absolute."""
    own = common / HARNESS / OWN
    (own / "info").mkdir(parents=True, exist_ok=True)
    names = ("pack", *(f"{n:02x}" for n in range(256)))
    if not os.path.lexists(own / names[-1]):  # made once, the last one last
        for name in names:
            if not os.path.lexists(own / name):
                os.symlink(f"../../objects/{name}", own / name)
    lines = [line.strip() for line in alternates.splitlines()]
    kept = [
        line if os.path.isabs(line) else os.path.normpath(common / "objects" / line)
        for line in lines
        if line and not line.startswith("#") and line != POOL_ENTRY
    ]
    _write_if_changed(own / "info" / "alternates", "".join(f"{line}\n" for line in kept))


def _write_if_changed(path: Path, text: str) -> None:
    data = text.encode("utf-8", "surrogateescape")
    if read_regular(path, limit=None) != data:
        write_file(path, data)


@contextlib.contextmanager
def locked(common: Path) -> Iterator[None]:
    """The stores' lock, between threads and processes (two harnesses, a worker) alike:
    the lists are read, changed and written whole."""
    folder = common / HARNESS
    folder.mkdir(exist_ok=True)
    fd = os.open(folder / "lock", os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)
