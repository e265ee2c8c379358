"""Settling a task's sandbox view of its git (``git_view``) after the run: what the agent
wrote in its private folder P brought into the repository's git directory C with the
harness's own git, outside the sandbox. The objects of P that the task's store lacks are
checked and copied into that store (``git_stores``: C reaches it, no other task's sandbox
does) without overwriting anything (a loose object against its name while it is copied, a
pack with ``git verify-pack``), then the task's branch is moved with ``update-ref``, only to
a commit whose history is complete in C and only from where the view left it.

Also the paths of a view (``Layout``), which both halves use.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import os
import re
import stat
import tempfile
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, Literal

from harness.workspaces.files import remove_tree
from harness.workspaces.git import GitResult, WorkspaceError, git
from harness.workspaces.git_files import open_regular, read_regular, write_file
from harness.workspaces.git_own import OwnObjects, index_names
from harness.workspaces.git_stores import ensure_store, store_path
from harness.workspaces.values import BRANCH_PREFIX, task_branch

__all__ = [
    "Layout",
    "branch_commit",
    "c_git",
    "hex_length",
    "object_format",
    "read_regular",
    "settle",
    "write_file",
]

logger = logging.getLogger(__name__)

_BRANCHES = "refs/heads/" + BRANCH_PREFIX.rstrip("/")  # where every task's branch ref lives
_HEX = re.compile(r"[0-9a-f]+")
_PACK = re.compile(r"pack-([0-9a-f]+)\.(pack|idx)")
_OBJECT_TYPES = (b"blob", b"tree", b"commit", b"tag")
_CHUNK = 1 << 16

Copied = Literal["copied", "present", "invalid"]


@dataclass(frozen=True)
class Layout:
    """The paths of one task's view: C, A and P, and what of P goes where in C."""

    slug: str
    common: Path  # C, resolved
    admin: Path  # A, resolved
    private: Path  # P

    @property
    def refs_mount(self) -> Path:
        return self.common / _BRANCHES

    @property
    def logs_mount(self) -> Path:
        return self.common / "logs" / _BRANCHES

    @property
    def objects(self) -> Path:
        return self.private / "objects"

    @property
    def store(self) -> Path:
        # The task's objects in C, settled there checked (``git_stores``).
        return store_path(self.common, self.slug)

    @property
    def shown(self) -> Path:
        # What the sandbox is shown at C (``git_shown``): made by the harness, read-only.
        return self.private / "common"

    @property
    def refs(self) -> Path:
        return self.private / "refs"

    @property
    def logs(self) -> Path:
        return self.private / "logs"

    @property
    def ref_file(self) -> Path:
        return self.refs / self.slug

    @property
    def start(self) -> Path:
        # Where the branch was when the view opened (or was last settled): outside every
        # bind, so the agent cannot change it.
        return self.private / "start"

    @property
    def branch_ref(self) -> str:
        return "refs/heads/" + task_branch(self.slug)


async def settle(layout: Layout) -> str | None:
    """Bring the objects in P into the task's store (which C reaches), then move the task's
    branch to the commit P's ref names (``git_view.close_view``, which checks the worktree's
    git first, says how). The new head commit when the branch moved, else None."""
    fmt = await object_format(layout)
    await _bring_objects(layout, fmt)
    return await _move_branch(layout, fmt)


async def c_git(layout: Layout, *args: str, check: bool = True) -> GitResult:
    """git in C itself (never through the worktree, whose git directory the agent wrote)."""
    return await git(f"--git-dir={layout.common}", *args, cwd=layout.common, check=check)


async def branch_commit(layout: Layout) -> str | None:
    found = await c_git(
        layout, "rev-parse", "--verify", "--quiet", f"{layout.branch_ref}^{{commit}}", check=False
    )
    return found.text if found.ok else None


# --- moving the branch --------------------------------------------------------------------


async def _move_branch(layout: Layout, fmt: str) -> str | None:
    branch = task_branch(layout.slug)
    new = await asyncio.to_thread(_read_ref, layout, hex_length(fmt))
    start = await asyncio.to_thread(read_regular, layout.start, 256)
    started = start.decode("ascii", "replace").strip() if start is not None else None
    if new == started:
        return None  # the agent did not move it, or this was settled already
    current = await branch_commit(layout)
    if new == current:
        await asyncio.to_thread(write_file, layout.start, f"{new}\n".encode())
        return None
    if current is None or (started is not None and current != started):
        now = f"moved to {current}" if current else "was deleted"
        raise WorkspaceError(
            f"task {layout.slug}'s branch {branch} {now} in the repository while its agent "
            f"worked: the agent's {new} was not put on it",
            fix=f"merge or cherry-pick {new} onto {branch} by hand; its objects are in the "
            "repository",
        )
    kind = await c_git(layout, "cat-file", "-t", new, check=False)
    if kind.text != "commit":
        found = "is not in the repository" if not kind.ok else f"is a {kind.text}, not a commit"
        raise _broken(layout, new, found)
    # Every object of the new history must be in C before a ref of C names it.
    walked = await c_git(
        layout, "rev-list", "--quiet", "--objects", new, "--not", current, check=False
    )
    if not walked.ok:
        reason = walked.stderr.strip().splitlines()[-1] if walked.stderr.strip() else "no message"
        raise _broken(layout, new, f"has an incomplete history ({reason})")
    await c_git(
        layout,
        *("update-ref", "-m", f"harness: the sandboxed work of task {layout.slug}"),
        *(layout.branch_ref, new, current),
    )
    await asyncio.to_thread(write_file, layout.start, f"{new}\n".encode())
    logger.info("task %s: %s moved to %s", layout.slug, branch, new)
    return new


def _broken(layout: Layout, commit: str, found: str) -> WorkspaceError:
    return WorkspaceError(
        f"the sandbox of task {layout.slug} left its branch at {commit}, which {found}: "
        f"{task_branch(layout.slug)} stays where it was",
        fix=f"look at the worktree's git (`git -C <worktree> log`); {layout.ref_file} is the "
        "branch as the agent left it",
    )


def _read_ref(layout: Layout, length: int) -> str:
    """The commit P's ref file names (a loose ref: the id and a newline)."""
    data = read_regular(layout.ref_file, limit=256)
    where = f"the sandbox of task {layout.slug}"
    fix = (
        f"the branch stays where it was; {layout.ref_file} should hold the commit the agent "
        "left its branch at: write it there and settle again, or open the view again"
    )
    if data is None:
        raise WorkspaceError(f"{where} left no branch ref {layout.ref_file}", fix=fix)
    text = data.decode("ascii", "replace").removesuffix("\n")
    if len(text) != length or not _HEX.fullmatch(text):
        raise WorkspaceError(f"{where} left its branch ref holding {text[:80]!r}", fix=fix)
    return text


def hex_length(fmt: str) -> int:
    return 64 if fmt == "sha256" else 40


# A repository's object format never changes: asked of git once per repository, not at
# every view opened and settled.
_FORMATS: dict[Path, str] = {}


async def object_format(layout: Layout) -> str:
    """C's object format (``sha1`` or ``sha256``), the name of its hash."""
    if layout.common not in _FORMATS:
        found = (await c_git(layout, "rev-parse", "--show-object-format")).text
        _FORMATS[layout.common] = found
    return _FORMATS[layout.common]


# --- bringing the objects in --------------------------------------------------------------


async def _bring_objects(layout: Layout, fmt: str) -> None:
    """Copy the object files of P that the task's store lacks into it. A loose object is
    checked while it is copied (its name is the hash of its content), a pack with ``git
    verify-pack`` once copied beside the store's packs: a file the agent planted under an
    object's name must never stand in for that object in C. Anything else in P (symlinks,
    temporary files) is left there. Never into C's own objects, which every task's sandbox
    is shown, but for a pack holding some of them.

    An object C's own store has is never copied (the sandbox's git writes one again when it
    cannot touch C's copy): ``git gc`` in C drops from C's own store whatever a store also
    holds, and every other task's sandbox would lose it (``git_promote``)."""
    target = await asyncio.to_thread(ensure_store, layout.common, layout.slug)
    if not await asyncio.to_thread(os.path.isdir, layout.objects):
        return
    length = hex_length(fmt)
    loose, packs = await asyncio.to_thread(_object_files, layout.objects, length)
    owned = await asyncio.to_thread(_owned, layout.common, [name for _, name in loose], length)
    counts: dict[Copied, int] = {"copied": 0, "present": 0, "invalid": 0}
    for source, name in loose:
        if name in owned:
            counts["present"] += 1
            continue
        outcome = await asyncio.to_thread(_copy_loose, source, target / name, fmt)
        counts[outcome] += 1
        if outcome == "invalid":
            logger.warning("task %s: %s is not a valid object, not copied", layout.slug, source)
    for pack in packs:
        outcome = await _copy_pack(layout, pack, target / "pack", length)
        counts[outcome] += 1
        if outcome == "invalid":
            logger.warning("task %s: %s is not a valid pack, not copied", layout.slug, pack)
    if counts["copied"] or counts["invalid"]:
        logger.info("task %s: objects into %s: %s", layout.slug, target, counts)


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


async def _copy_pack(layout: Layout, pack: Path, target: Path, length: int) -> Copied:
    """Copy a pack and its index into the store's pack folder unless it is there: both copied
    into a temporary folder there (git looks at ``*.idx`` files of the pack folder only),
    verified, then linked into place, the pack first (git finds a pack by its index). A pack
    holding an object of C's own store goes into C's own pack folder instead (the rule of
    ``_bring_objects``; its other objects are then shown to every task)."""
    idx = pack.with_suffix(".idx")
    if await asyncio.to_thread(os.path.lexists, target / idx.name):
        return "present"
    await asyncio.to_thread(target.mkdir, parents=True, exist_ok=True)
    temp = Path(await asyncio.to_thread(tempfile.mkdtemp, dir=target, prefix="tmp_pack_"))
    try:
        for file in (pack, idx):
            if not await asyncio.to_thread(_copy_regular, file, temp / file.name):
                return "invalid"
        verified = await c_git(layout, "verify-pack", str(temp / idx.name), check=False)
        if not verified.ok:
            return "invalid"
        if await asyncio.to_thread(_overlaps, layout.common, temp / idx.name, length):
            target = layout.common / "objects" / "pack"
            logger.info("task %s: %s holds objects of the repository's own", layout.slug, pack)
        await asyncio.to_thread(_link, str(temp / pack.name), target / pack.name)
        return await asyncio.to_thread(_link, str(temp / idx.name), target / idx.name)
    finally:
        await asyncio.to_thread(remove_tree, temp)


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
