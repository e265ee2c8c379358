"""Keeping the repository's own object store whole for its public history (every ref but
the tasks' branches and remotes' copies of them), which is what every task's sandbox is shown
beside its own task's store (``git_stores``).

Two ways git would leave a public object in a task's store alone:

- git never fetches or writes an object it already reaches: once a task's work is merged
  (a pull request) and fetched, or its blob committed again, the base history names objects
  that only that task's store holds, and no other task's sandbox could read its base;
- ``git gc`` (``repack -l``) drops from C's own packs every object an alternate also holds:
  a public object also in a store would leave C's own store at the operator's next gc.

So when the public refs moved since last time (a fetch, the operator's commits), the objects
the new public history reaches are looked for in the stores: each one there is moved into C's
own store (a loose object; a pack whole, with the rest of that task's objects in it), so no
store holds a public object. Settling never copies an object C's own store has
(``git_settle``). Cheap when nothing moved: one ``for-each-ref``. Blocking: part of opening
a view, which runs whole in one worker thread (``git_view``).
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import tempfile
import zlib
from collections.abc import Iterable
from pathlib import Path

from harness.workspaces.git_files import read_regular, write_file
from harness.workspaces.git_own import OwnObjects, index_names
from harness.workspaces.git_settle import Layout, c_git, hex_length, object_format
from harness.workspaces.git_shown import is_task_ref
from harness.workspaces.git_stores import HARNESS, STORES, locked, store_names
from harness.workspaces.values import BRANCH_PREFIX

logger = logging.getLogger(__name__)

# Under C/harness: the public refs' commits whose history C's own store was last made whole
# for, one a line.
CHECKED = "public"
# Bytes of commit ids one git command line may take (Linux allows about 2 MB in all).
_MAX_ARGS = 1 << 20


def promote(layout: Layout) -> int:
    """Moves into C's own store the objects of the public history new since last time that
    tasks' stores hold; how many files moved."""
    tips = public_tips(layout)
    checked_file = layout.common / HARNESS / CHECKED
    before = _checked_before(checked_file, tips)
    if before is None:  # the first time: what C held before stores existed was whole
        return 0
    checked = before.decode("ascii", "replace").split()
    seen = set(checked)
    new = [tip for tip in tips if tip not in seen]
    moved = 0
    if new and 41 * (len(new) + len(checked)) > _MAX_ARGS:
        logger.warning(
            "%s: too many public refs to check which objects its tasks' stores hold (%d)",
            layout.common,
            len(new) + len(checked),
        )
        return 0
    objects: list[str] = []
    length = 0
    if new:
        walked = c_git(
            layout,
            *("rev-list", "--objects", "--no-object-names", "--ignore-missing", *new),
            *("--not", *checked),
            check=False,
        )
        if not walked.ok:
            logger.warning("public history of %s not checked: %s", layout.common, walked.stderr)
            return 0
        length = hex_length(object_format(layout))
        objects = walked.text.split()
    if new or tips != checked:
        recorded = tips if tips != checked else None
        moved = _promote_and_record(layout.common, objects, length, checked_file, recorded)
        if moved:
            logger.info("%s: %d files of tasks' stores moved into its own", layout.common, moved)
    return moved


def public_tips(layout: Layout) -> list[str]:
    """What C's public refs (all but task branches and remotes' copies of them) name. Never
    ``--all``, which also takes every worktree's HEAD: the tasks' branches."""
    listed = c_git(layout, "for-each-ref", "--format=%(objectname) %(refname)")
    return sorted(
        {
            line.split(" ", 1)[0]
            for line in listed.text.splitlines()
            if line and not is_task_ref(line.split(" ", 1)[1])
        }
    )


def _checked_before(path: Path, tips: list[str]) -> bytes | None:
    """The checked file's content; None, with ``tips`` written there, the first time
    (blocking)."""
    before = read_regular(path, None)
    if before is None:
        _write_checked(path, tips)
    return before


def _promote_and_record(
    common: Path, objects: list[str], length: int, path: Path, tips: list[str] | None
) -> int:
    """``_promote``, then ``tips`` (when given) written to the checked file (blocking)."""
    moved = _promote(common, objects, length)
    if tips is not None:
        _write_checked(path, tips)
    return moved


def _write_checked(path: Path, tips: list[str]) -> None:
    path.parent.mkdir(exist_ok=True)
    write_file(path, "".join(f"{tip}\n" for tip in tips).encode())


def _promote(common: Path, objects: Iterable[str], length: int) -> int:
    """``promote``'s file work (blocking), under the stores' lock."""
    wanted = set(objects)
    if not wanted:
        return 0
    moved = 0
    with locked(common):
        target = common / "objects"
        for name in store_names(common):
            store = common / HARNESS / STORES / name
            moved += _promote_packs(store, target, wanted, length)
            for oid in sorted(wanted & _loose_names(store, length)):
                source = store / oid[:2] / oid[2:]
                if not os.path.lexists(target / oid[:2] / oid[2:]):
                    (target / oid[:2]).mkdir(exist_ok=True)
                    with contextlib.suppress(FileExistsError):  # another copy came first
                        os.link(source, target / oid[:2] / oid[2:])
                os.unlink(source)
                moved += 1
    return moved


def _promote_packs(store: Path, target: Path, wanted: set[str], length: int) -> int:
    """The store's packs holding a wanted object, moved whole into C's own pack folder."""
    moved = 0
    for idx in sorted((store / "pack").glob("pack-*.idx")):
        data = read_regular(idx, None)
        if data is None:
            continue
        names = {name.hex() for name in index_names(data, length // 2)}
        if not names & wanted:
            continue
        pack = idx.with_suffix(".pack")
        (target / "pack").mkdir(exist_ok=True)
        for file in (pack, idx):  # the pack first: git finds a pack by its index
            if not os.path.lexists(target / "pack" / file.name):
                os.link(file, target / "pack" / file.name)
        for file in (idx, pack):
            os.unlink(file)
        moved += 2
    return moved


def _loose_names(store: Path, length: int) -> set[str]:
    found: set[str] = set()
    try:
        folders = [e for e in os.scandir(store) if len(e.name) == 2 and e.is_dir()]
    except FileNotFoundError:
        return found
    for folder in folders:
        with os.scandir(folder.path) as entries:
            found.update(folder.name + e.name for e in entries if len(e.name) == length - 2)
    return found


def complete_own(layout: Layout) -> int:
    """Copies into the task's store the objects of its branch that neither C's own store nor
    its store holds; how many. Git the harness runs in C's sight
    of every store writes no object some store holds already: a commit the harness made of
    what an agent left may name a blob only another task's store has, out of this task's
    sandbox's sight."""
    branches = BRANCH_PREFIX.rstrip("/")
    walked = c_git(
        layout,
        *("rev-list", "--objects", "--no-object-names", layout.branch_ref, "--not"),
        # The public refs, named by kind: ``--all`` would take the tasks' worktrees' HEADs.
        *(f"--exclude={branches}/*", "--branches", "--tags"),
        *(f"--exclude=*/{branches}/*", "--remotes"),
        check=False,
    )
    if not walked.ok:
        logger.warning("task %s: its branch's objects not checked: %s", layout.slug, walked.stderr)
        return 0
    length = hex_length(object_format(layout))
    missing = _missing(layout, walked.text.split(), length)
    for oid in missing:
        kind = c_git(layout, "cat-file", "-t", oid).text
        content = c_git(layout, "cat-file", kind, oid).stdout
        _write_loose(layout.store, oid, kind, content, length)
    if missing:
        logger.info("task %s: %d objects copied into its store", layout.slug, len(missing))
    return len(missing)


def _missing(layout: Layout, objects: list[str], length: int) -> list[str]:
    with (
        OwnObjects(layout.common / "objects", length) as own,
        OwnObjects(layout.store, length) as store,
    ):
        return [oid for oid in objects if not own.has(oid) and not store.has(oid)]


def _write_loose(store: Path, oid: str, kind: str, content: bytes, length: int) -> None:
    """One loose object, written beside its place and linked in, checked against its name."""
    data = f"{kind} {len(content)}\0".encode() + content
    if hashlib.new("sha256" if length == 64 else "sha1", data).hexdigest() != oid:
        raise OSError(f"object {oid} read back as something else")
    folder = store / oid[:2]
    folder.mkdir(parents=True, exist_ok=True)
    fd, temp = tempfile.mkstemp(dir=folder, prefix="tmp_obj_")
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(zlib.compress(data))
        os.chmod(temp, 0o444)
        with contextlib.suppress(FileExistsError):
            os.link(temp, folder / oid[2:])
    finally:
        os.unlink(temp)
