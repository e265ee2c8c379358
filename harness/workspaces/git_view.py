"""The git an agent may use inside its OS sandbox, without write access to the repository.

A task's worktree is a linked worktree of a repository whose git directory (the common dir,
C) holds every task's branches and the operator's own branches, hooks and config. Inside the
sandbox C is read-only; what git must write goes to places that are the task's alone:

- the worktree's admin folder A (``C/worktrees/<name>``: HEAD, index, logs/HEAD) is writable;
- new objects go to ``P/objects`` (``GIT_OBJECT_DIRECTORY``), C's objects are read from
  there as an alternate;
- ``P/refs`` is shown over ``C/refs/heads/harness`` and ``P/logs`` over
  ``C/logs/refs/heads/harness``: the task's branch ref (and its reflog) is a file of P, and
  other tasks' loose branch refs are not there (``packed-refs`` may still list them).

P is a private folder per task, outside the worktree (the workspaces put it at
``<root>/.sandbox/<slug>``). After the run, :func:`close_view` brings the agent's work into C
with the harness's own git: the objects, checked and copied without overwriting anything, and
the branch, moved only to a commit whose history is complete. Until then C's own git
maintenance (``gc``) may complain about the objects A's index and reflog name that are in P.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import os
import re
import stat
import tempfile
import zlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, Literal

from harness.workspaces.files import remove_tree, worktree_admin_dir
from harness.workspaces.git import GitResult, TamperedWorkspaceError, WorkspaceError, git
from harness.workspaces.values import BRANCH_PREFIX, Workspace, task_branch

logger = logging.getLogger(__name__)

# The folder under the workspaces' root holding each task's P.
SANDBOXES = ".sandbox"

_BRANCHES = "refs/heads/" + BRANCH_PREFIX.rstrip("/")  # where every task's branch ref lives
_HEX = re.compile(r"[0-9a-f]+")
_PACK = re.compile(r"pack-([0-9a-f]+)\.(pack|idx)")
_OBJECT_TYPES = (b"blob", b"tree", b"commit", b"tag")
_CHUNK = 1 << 16

Copied = Literal["copied", "present", "invalid"]


@dataclass(frozen=True)
class Bind:
    source: str  # host path
    target: str  # path inside the sandbox (the same as source for everything here)
    writable: bool


@dataclass(frozen=True)
class GitView:
    """What an agent's sandbox must show of its worktree's git, in mount order (a later bind
    goes over an earlier one), and the environment its git needs there."""

    binds: tuple[Bind, ...]
    env: Mapping[str, str]


@dataclass(frozen=True)
class _Layout:
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


# --- opening --------------------------------------------------------------------------------


async def open_view(
    workspace: Workspace, common: Path, private: Path, *, writes: bool = True
) -> GitView:
    """Prepare ``private`` (P) for a run of an agent in ``workspace``, a worktree of the
    repository whose git directory is ``common`` (C), and say what its sandbox must show.

    For a writer, work a previous view left unsettled (its branch moved in P) is settled
    first; P's refs and logs are then made afresh from C (the branch's current commit and its
    reflog); its objects are kept (A's index may name some of them). A reader (``writes``
    false), which may run beside a writer, gets the same folders read-only and P as it is,
    the ref only brought up to C's branch when P holds no unsettled commit. The worktree is
    read-only for a reader too. TamperedWorkspaceError when the worktree's git directory is
    no longer the one the harness made in C.
    """
    layout = await _layout(workspace, common, private)
    await _check_admin(workspace, layout)
    await asyncio.to_thread(_make_mount_points, layout)
    if writes and await asyncio.to_thread(_unsettled, layout):
        try:
            await close_view(workspace, common, private)
        except WorkspaceError as exc:
            # Its objects stay in P; only the ref naming them is replaced.
            logger.warning(
                "task %s: the unsettled branch of its last run is dropped: %s",
                workspace.slug,
                exc.message,
            )
    head = await _branch_commit(layout)
    if head is None:
        raise WorkspaceError(
            f"the repository {layout.common} has no branch {task_branch(workspace.slug)}",
            fix="prepare the task's workspace again",
        )
    await asyncio.to_thread(_fill_private if writes else _show_private, layout, head)
    binds = (
        Bind(str(workspace.path), str(workspace.path), writes),
        Bind(str(layout.common), str(layout.common), False),
        Bind(str(layout.admin), str(layout.admin), writes),
        Bind(str(layout.refs), str(layout.refs_mount), writes),
        Bind(str(layout.logs), str(layout.logs_mount), writes),
        Bind(str(layout.objects), str(layout.objects), writes),
    )
    env = {
        "GIT_OBJECT_DIRECTORY": str(layout.objects),
        "GIT_ALTERNATE_OBJECT_DIRECTORIES": _alternate(layout.common / "objects"),
    }
    return GitView(binds, env)


def _alternate(path: Path) -> str:
    """One entry of git's alternates list, which ``:`` separates: quoted C-style when the
    path has a colon or starts with a quote."""
    text = str(path)
    if ":" not in text and not text.startswith('"'):
        return text
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


async def _layout(workspace: Workspace, common: Path, private: Path) -> _Layout:
    if workspace.git_dir is None:
        raise WorkspaceError(
            f"task {workspace.slug}'s workspace {workspace.path} is not a git worktree",
            fix="a scratch folder needs no git view",
        )
    resolved = Path(await asyncio.to_thread(os.path.realpath, common))
    admin = Path(await asyncio.to_thread(os.path.realpath, workspace.git_dir))
    return _Layout(workspace.slug, resolved, admin, private)


async def _check_admin(workspace: Workspace, layout: _Layout) -> None:
    """A is still what the harness made: the worktree's ``.git`` names it, it is a folder of
    ``C/worktrees``, its ``commondir`` leads to C and its ``gitdir`` back to the worktree. An
    agent can rewrite all but the first from inside, to send git (its own, the harness's) to
    another repository."""
    now = await asyncio.to_thread(worktree_admin_dir, workspace.path)
    if now != workspace.git_dir:
        raise TamperedWorkspaceError(workspace, now)
    problem = await asyncio.to_thread(_admin_problem, layout, workspace.path)
    if problem is not None:
        raise TamperedWorkspaceError(workspace, f"{layout.admin}, {problem}")


def _admin_problem(layout: _Layout, worktree: Path) -> str | None:
    admin = layout.admin
    if admin.parent != layout.common / "worktrees" or not admin.is_dir():
        return f"which is not a folder of {layout.common / 'worktrees'}"
    try:
        common = (admin / "commondir").read_text(encoding="utf-8").strip()
        back = (admin / "gitdir").read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError) as exc:
        return f"whose commondir or gitdir is unreadable ({exc})"
    if Path(os.path.realpath(admin / common)) != layout.common:
        return f"whose commondir leads to {os.path.realpath(admin / common)}"
    if os.path.realpath(admin / back) != os.path.realpath(worktree / ".git"):
        return f"whose gitdir leads to {os.path.realpath(admin / back)}"
    return None


def _make_mount_points(layout: _Layout) -> None:
    """bubblewrap cannot make a folder inside a read-only bind: the folders P's refs and logs
    are shown over must exist in C, as real folders (a symlink would move the bind)."""
    for folder in (layout.refs_mount, layout.logs_mount):
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise WorkspaceError(
                f"cannot make {folder} in the repository: {exc.strerror or exc}",
                fix=f"make sure {folder} can be a folder (no branch is named "
                f"{BRANCH_PREFIX.rstrip('/')}) and the harness may write there",
            ) from exc
        if os.path.realpath(folder) != str(folder):
            raise WorkspaceError(
                f"{folder} in the repository leads elsewhere ({os.path.realpath(folder)})",
                fix=f"replace it by a plain folder holding the {BRANCH_PREFIX}* branch refs",
            )


def _fill_private(layout: _Layout, head: str) -> None:
    """P's refs and logs afresh, emptied in place: a sandbox of the same task still running
    keeps seeing the folders its binds show."""
    for folder in (layout.private, layout.objects, layout.refs, layout.logs):
        _plain_folder(folder)
    for folder in (layout.refs, layout.logs):
        with os.scandir(folder) as entries:
            for entry in entries:
                if entry.is_dir(follow_symlinks=False):
                    remove_tree(Path(entry.path))
                else:
                    os.unlink(entry.path)
    reflog = _read_regular(layout.common / "logs" / layout.branch_ref, limit=None)
    if reflog is not None:
        _write(layout.logs / layout.slug, reflog)
    _write(layout.ref_file, f"{head}\n".encode())
    _write(layout.start, f"{head}\n".encode())


def _show_private(layout: _Layout, head: str) -> None:
    """P for a reader: left as it is, but for a ref that names no commit of a writer's (and so
    may be behind C's branch, moved by the harness since)."""
    for folder in (layout.private, layout.objects, layout.refs, layout.logs):
        _plain_folder(folder)
    if not _unsettled(layout) and _read_regular(layout.ref_file, 256) != f"{head}\n".encode():
        _write(layout.ref_file, f"{head}\n".encode())
        _write(layout.start, f"{head}\n".encode())


def _plain_folder(folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    if folder.is_symlink() or not folder.is_dir():
        raise WorkspaceError(
            f"{folder} is not a plain folder", fix=f"delete {folder}; the harness makes it again"
        )


def _unsettled(layout: _Layout) -> bool:
    """A previous view's branch moved and was never brought into C."""
    if not layout.ref_file.exists() and not layout.ref_file.is_symlink():
        return False
    return _read_regular(layout.ref_file, limit=256) != _read_regular(layout.start, limit=256)


# --- closing --------------------------------------------------------------------------------


async def close_view(workspace: Workspace, common: Path, private: Path) -> str | None:
    """Bring the work of the agent that ran in ``workspace``'s view into C, with the harness's
    own git, outside the sandbox: the objects in P (those C lacks, each checked against its
    name), then the task's branch, moved to the commit P's ref names once that commit and
    its history are complete in C. The new head commit when the branch moved, else None.

    Idempotent. WorkspaceError, the branch left where it was, when P's ref is missing,
    malformed or names something broken, or when the branch moved in C since the view opened
    (the agent's commits stay in P, and C now has their objects).
    """
    layout = await _layout(workspace, common, private)
    await _check_admin(workspace, layout)
    fmt = (await _c_git(layout, "rev-parse", "--show-object-format")).text
    await _bring_objects(layout, fmt)
    return await _move_branch(layout, fmt)


async def _c_git(layout: _Layout, *args: str, check: bool = True) -> GitResult:
    """git in C itself (never through the worktree, whose git directory the agent wrote)."""
    return await git(f"--git-dir={layout.common}", *args, cwd=layout.common, check=check)


async def _branch_commit(layout: _Layout) -> str | None:
    found = await _c_git(
        layout, "rev-parse", "--verify", "--quiet", f"{layout.branch_ref}^{{commit}}", check=False
    )
    return found.text if found.ok else None


async def _move_branch(layout: _Layout, fmt: str) -> str | None:
    branch = task_branch(layout.slug)
    new = await asyncio.to_thread(_read_ref, layout, _hex_length(fmt))
    start = await asyncio.to_thread(_read_regular, layout.start, 256)
    started = start.decode("ascii", "replace").strip() if start is not None else None
    if new == started:
        return None  # the agent did not move it, or this was settled already
    current = await _branch_commit(layout)
    if new == current:
        await asyncio.to_thread(_write, layout.start, f"{new}\n".encode())
        return None
    if current is None or (started is not None and current != started):
        now = f"moved to {current}" if current else "was deleted"
        raise WorkspaceError(
            f"task {layout.slug}'s branch {branch} {now} in the repository while its agent "
            f"worked: the agent's {new} was not put on it",
            fix=f"merge or cherry-pick {new} onto {branch} by hand; its objects are in the "
            "repository",
        )
    kind = await _c_git(layout, "cat-file", "-t", new, check=False)
    if kind.text != "commit":
        found = "is not in the repository" if not kind.ok else f"is a {kind.text}, not a commit"
        raise _broken(layout, new, found)
    # Every object of the new history must be in C before a ref of C names it.
    walked = await _c_git(
        layout, "rev-list", "--quiet", "--objects", new, "--not", current, check=False
    )
    if not walked.ok:
        reason = walked.stderr.strip().splitlines()[-1] if walked.stderr.strip() else "no message"
        raise _broken(layout, new, f"has an incomplete history ({reason})")
    await _c_git(
        layout,
        *("update-ref", "-m", f"harness: the sandboxed work of task {layout.slug}"),
        *(layout.branch_ref, new, current),
    )
    await asyncio.to_thread(_write, layout.start, f"{new}\n".encode())
    logger.info("task %s: %s moved to %s", layout.slug, branch, new)
    return new


def _broken(layout: _Layout, commit: str, found: str) -> WorkspaceError:
    return WorkspaceError(
        f"the sandbox of task {layout.slug} left its branch at {commit}, which {found}: "
        f"{task_branch(layout.slug)} stays where it was",
        fix=f"look at the worktree's git (`git -C <worktree> log`); {layout.ref_file} is the "
        "branch as the agent left it",
    )


def _read_ref(layout: _Layout, length: int) -> str:
    """The commit P's ref file names (a loose ref: the id and a newline)."""
    data = _read_regular(layout.ref_file, limit=256)
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


def _hex_length(fmt: str) -> int:
    return 64 if fmt == "sha256" else 40


# --- bringing the objects in --------------------------------------------------------------


async def _bring_objects(layout: _Layout, fmt: str) -> None:
    """Copy the object files of P that C lacks into C. A loose object is checked while it is
    copied (its name is the hash of its content), a pack with ``git verify-pack`` once copied
    beside C's packs: a file the agent planted under an object's name must never stand in for
    that object in C. Anything else in P (symlinks, temporary files) is left there."""
    if not await asyncio.to_thread(os.path.isdir, layout.objects):
        return
    loose, packs = await asyncio.to_thread(_object_files, layout.objects, _hex_length(fmt))
    target = layout.common / "objects"
    counts: dict[Copied, int] = {"copied": 0, "present": 0, "invalid": 0}
    for source, name in loose:
        outcome = await asyncio.to_thread(_copy_loose, source, target / name, fmt)
        counts[outcome] += 1
        if outcome == "invalid":
            logger.warning("task %s: %s is not a valid object, not copied", layout.slug, source)
    for pack in packs:
        outcome = await _copy_pack(layout, pack, target / "pack")
        counts[outcome] += 1
        if outcome == "invalid":
            logger.warning("task %s: %s is not a valid pack, not copied", layout.slug, pack)
    if counts["copied"] or counts["invalid"]:
        logger.info("task %s: objects into %s: %s", layout.slug, target, counts)


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
    try:
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
    with _open_regular(source) as src:
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


async def _copy_pack(layout: _Layout, pack: Path, target: Path) -> Copied:
    """Copy a pack and its index into C's pack folder unless it is there: both copied into a
    temporary folder there (git looks at ``*.idx`` files of the pack folder only), verified,
    then linked into place, the pack first (git finds a pack by its index)."""
    idx = pack.with_suffix(".idx")
    if await asyncio.to_thread(os.path.lexists, target / idx.name):
        return "present"
    await asyncio.to_thread(target.mkdir, parents=True, exist_ok=True)
    temp = Path(await asyncio.to_thread(tempfile.mkdtemp, dir=target, prefix="tmp_pack_"))
    try:
        for file in (pack, idx):
            if not await asyncio.to_thread(_copy_regular, file, temp / file.name):
                return "invalid"
        verified = await _c_git(layout, "verify-pack", str(temp / idx.name), check=False)
        if not verified.ok:
            return "invalid"
        await asyncio.to_thread(_link, str(temp / pack.name), target / pack.name)
        return await asyncio.to_thread(_link, str(temp / idx.name), target / idx.name)
    finally:
        await asyncio.to_thread(remove_tree, temp)


def _copy_regular(source: Path, target: Path) -> bool:
    with _open_regular(source) as src:
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


# --- small file helpers ---------------------------------------------------------------------


@contextlib.contextmanager
def _open_regular(path: Path) -> Iterator[BinaryIO | None]:
    """The file opened for reading when it is a regular file; None for anything else
    (missing, a symlink, a FIFO that would block the read...)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        yield None
        return
    with os.fdopen(fd, "rb") as file:
        yield file if stat.S_ISREG(os.fstat(fd).st_mode) else None


def _read_regular(path: Path, limit: int | None) -> bytes | None:
    """The content of a regular file (up to ``limit`` bytes); None for anything else."""
    with _open_regular(path) as file:
        if file is None:
            return None
        return file.read() if limit is None else file.read(limit)


def _write(path: Path, data: bytes) -> None:
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
