"""Running git for the workspaces, and reading what an agent changed in a worktree.

Every git call is a subprocess (``asyncio.create_subprocess_exec``), so the event loop never
waits on git. Each call gets a fixed locale (so error text can be recognised), no terminal
prompt (a clone needing credentials fails instead of hanging), no optional locks (a status
never takes the agent's index lock) and none of the caller's ``GIT_DIR``-style variables.
Lock errors from another git process (``index.lock``, ``config.lock``, a ref lock) are retried
briefly; any other failure is a :class:`GitError` with git's own message.

What an agent changed is read through a scratch index (``GIT_INDEX_FILE``): a copy of the
worktree's index in which every untracked file is marked intent-to-add. Diffing the working
tree against a commit through it shows committed, uncommitted and untracked work at once,
while the agent's own index is never written.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import re
import shutil
import tempfile
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from harness.errors import HarnessError
from harness.retry import Backoff

logger = logging.getLogger(__name__)

# A clone of a large repository over a slow link is the longest call; nothing waits forever.
TIMEOUT_SECONDS = 600.0
# Another git process holding a lock is done within milliseconds to a second or two.
_LOCK_BACKOFF = Backoff(first=0.05, cap=1.6)
_LOCK_RETRIES = 6
_LOCK_ERROR = re.compile(
    r"\.lock'?: File exists|Unable to create '[^']*\.lock'|could not lock|cannot lock ref"
    r"|Another git process seems to be running",
    re.IGNORECASE,
)
# Variables that would point git at another repository, index or work tree than the one
# each call names.
_REDIRECTS = (
    "GIT_DIR",
    "GIT_WORK_TREE",
    "GIT_INDEX_FILE",
    "GIT_COMMON_DIR",
    "GIT_OBJECT_DIRECTORY",
    "GIT_ALTERNATE_OBJECT_DIRECTORIES",
    "GIT_NAMESPACE",
    "GIT_PREFIX",
)
# Secrets of the harness's own process: git never needs them, and a program git might run
# (an agent could have configured one) must not read them.
_SECRETS = ("SLACK_", "ANTHROPIC_", "HARNESS_")
# What a worktree's own config (which its agent can write) could make the harness's git run:
# turned off on every call's command line, which takes precedence over any config file.
_DISARMED = (
    "core.fsmonitor=false",
    "core.hooksPath=/dev/null",
    "core.untrackedCache=false",
    "core.pager=cat",
    "diff.external=",
    "commit.gpgSign=false",
    "tag.gpgSign=false",
    "protocol.ext.allow=never",
)
_DISARMING = tuple(arg for setting in _DISARMED for arg in ("-c", setting))
# Diff output others read (patch files, numstat) must not depend on the user's git config.
_PLAIN_DIFF = (
    "--no-color",
    "--no-ext-diff",
    "--no-textconv",
    "--no-renames",
    "--src-prefix=a/",
    "--dst-prefix=b/",
)

FileStatus = Literal["added", "modified", "deleted", "type changed"]
_STATUS: dict[str, FileStatus] = {
    "A": "added",
    "M": "modified",
    "D": "deleted",
    "T": "type changed",
}


class WorkspaceError(HarnessError):
    """A workspace could not be prepared, read or removed."""


class TamperedWorkspaceError(WorkspaceError):
    """A worktree's ``.git`` was changed or removed (by its agent, say) since the harness made
    it: the harness does not trust it with its own git."""

    def __init__(self, workspace: Any, now: str | None) -> None:
        found = f"it names {now}" if now else "it is gone or unreadable"
        super().__init__(
            f"the .git of task {workspace.slug}'s worktree was changed ({found}, not "
            f"{workspace.git_dir}): its work was neither read nor committed",
            fix=f"look at {workspace.path} before trusting it; the task's branch holds what "
            "was committed before",
        )


class SwitchedBranchError(TamperedWorkspaceError):
    """A worktree's HEAD was moved off its task's branch (its agent can write HEAD): the
    harness commits nothing there, which would land on another branch."""

    def __init__(self, workspace: Any, head: str | None) -> None:
        on = f"on {head}" if head else "on a detached HEAD"
        WorkspaceError.__init__(
            self,
            f"task {workspace.slug}'s worktree is {on}, not its branch {workspace.branch}: "
            "its work was neither read nor committed",
            fix=f"look at {workspace.path} before trusting it; the task's branch holds what "
            "was committed before",
        )


class GitError(WorkspaceError):
    """A git command failed; ``stderr`` is git's own explanation."""

    def __init__(self, args: tuple[str, ...], cwd: Path, stderr: str, *, fix: str) -> None:
        reason = stderr.strip().splitlines()[-1] if stderr.strip() else "no message"
        super().__init__(f"`git {' '.join(args)}` failed in {cwd}: {reason}", fix=fix)
        self.args_run = args
        self.stderr = stderr


@dataclass(frozen=True)
class GitResult:
    returncode: int
    stdout: bytes
    stderr: str

    @property
    def ok(self) -> bool:
        return self.returncode == 0

    @property
    def text(self) -> str:
        return self.stdout.decode("utf-8", "surrogateescape").strip()


def git_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in _REDIRECTS and not key.startswith(_SECRETS)
    }
    env.update(LC_ALL="C", LANGUAGE="C", GIT_TERMINAL_PROMPT="0", GIT_OPTIONAL_LOCKS="0")
    env.update(extra or {})
    return env


def disarmed_env(cwd: Path) -> dict[str, str]:
    """The environment for a command the harness runs in an agent's folder that is not its
    own git call (a metadata field such as ``git rev-parse``): none of the harness's secrets,
    every git it starts disarmed as the harness's own (``GIT_CONFIG_*`` count as ``-c``), and
    no enclosing repository above the folder."""
    env = git_env({"GIT_CEILING_DIRECTORIES": str(cwd.parent)})
    env["GIT_CONFIG_COUNT"] = str(len(_DISARMED))
    for index, setting in enumerate(_DISARMED):
        key, _, value = setting.partition("=")
        env[f"GIT_CONFIG_KEY_{index}"] = key
        env[f"GIT_CONFIG_VALUE_{index}"] = value
    return env


async def git(
    *args: str,
    cwd: Path,
    env: Mapping[str, str] | None = None,
    check: bool = True,
    fix: str = "",
    timeout: float = TIMEOUT_SECONDS,
) -> GitResult:
    """Run ``git args`` in ``cwd``; with ``check`` a failure raises GitError carrying ``fix``."""
    # Never a repository above ``cwd``: a worktree whose .git its agent deleted must not send
    # the harness's git to an enclosing checkout (the operator's).
    guarded = {"GIT_CEILING_DIRECTORIES": str(Path(cwd).absolute().parent), **(env or {})}
    for delay in (*_LOCK_BACKOFF.delays(_LOCK_RETRIES), None):
        result = await _run((*_DISARMING, *args), cwd, git_env(guarded), timeout)
        if result.ok or delay is None or not _LOCK_ERROR.search(result.stderr):
            break
        logger.debug("git %s in %s: lock held, retrying in %.2f s", args[0], cwd, delay)
        await asyncio.sleep(delay)
    if check and not result.ok:
        logger.debug("git %s in %s failed: %s", " ".join(args), cwd, result.stderr.strip())
        raise GitError(args, cwd, result.stderr, fix=fix or "fix what git reports, then retry")
    return result


async def _run(args: tuple[str, ...], cwd: Path, env: dict[str, str], timeout: float) -> GitResult:
    try:
        proc = await asyncio.create_subprocess_exec(
            "git",
            *args,
            cwd=cwd,
            env=env,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
    except FileNotFoundError as exc:
        # Python names the folder when changing into it failed, else the program.
        if exc.filename is not None and str(exc.filename) == str(cwd):
            raise WorkspaceError(
                f"{cwd} does not exist", fix="prepare the task's workspace again"
            ) from exc
        raise WorkspaceError("git is not installed (no `git` on PATH)", fix="install git") from exc
    try:
        stdout, stderr = await asyncio.wait_for(proc.communicate(), timeout)
    except TimeoutError:
        await _kill(proc)
        raise WorkspaceError(
            f"`git {' '.join(args)}` in {cwd} took longer than {timeout:.0f} s",
            fix="check the repository and the network, then try again",
        ) from None
    except BaseException:
        # Cancelled: a git left running would hold its locks with nobody waiting for it.
        await _kill(proc)
        raise
    return GitResult(proc.returncode or 0, stdout, stderr.decode("utf-8", "replace"))


async def _kill(proc: asyncio.subprocess.Process) -> None:
    if proc.returncode is None:
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
        await asyncio.shield(proc.wait())


async def head_branch(worktree: Path) -> str | None:
    """The branch checked out in ``worktree``; None when HEAD is detached."""
    result = await git("symbolic-ref", "--quiet", "--short", "HEAD", cwd=worktree, check=False)
    return result.text if result.ok else None


async def has_uncommitted_work(worktree: Path) -> bool:
    """Modified, staged, deleted or untracked (not ignored) files."""
    result = await git("status", "--porcelain", "--untracked-files=normal", cwd=worktree)
    return bool(result.stdout.strip())


async def commit_all(worktree: Path, message: str, *, author: str, email: str) -> str | None:
    """Commit every change in the worktree (untracked files too, not ignored ones) with
    ``message``; the new commit, or None when there was nothing to commit. The repository's
    hooks and signing are skipped: this records the work as it is, it does not vet it."""
    if not await has_uncommitted_work(worktree):
        return None
    await git("add", "--all", cwd=worktree)
    await git(
        *("-c", f"user.name={author}", "-c", f"user.email={email}", "-c", "commit.gpgsign=false"),
        *("commit", "--quiet", "--no-verify", "--message", message),
        cwd=worktree,
        fix="commit the work in the worktree by hand, or set `workspaces.commitWork: false`",
    )
    return (await git("rev-parse", "HEAD", cwd=worktree)).text


# --- what an agent changed ----------------------------------------------------------------


@dataclass(frozen=True)
class FileChange:
    path: str  # relative to the worktree, as git spells it
    status: FileStatus
    insertions: int | None  # None for a binary file
    deletions: int | None


@contextlib.asynccontextmanager
async def scratch_index(worktree: Path) -> AsyncIterator[dict[str, str]]:
    """Environment for git calls that see untracked files as added, leaving the real index be.

    The copy keeps the real index's stat cache, so git re-reads only files that changed.
    """
    where = await git("rev-parse", "--path-format=absolute", "--git-path", "index", cwd=worktree)
    index = Path(where.text)
    folder = Path(await asyncio.to_thread(tempfile.mkdtemp, prefix="harness-index-"))
    env = {"GIT_INDEX_FILE": str(folder / "index")}
    try:
        copied = await asyncio.to_thread(_copy_if_present, index, folder / "index")
        if not copied:
            await git("read-tree", "HEAD", cwd=worktree, env=env)
        await git("add", "--all", "--intent-to-add", cwd=worktree, env=env)
        yield env
    finally:
        await asyncio.to_thread(shutil.rmtree, folder, True)


def _copy_if_present(source: Path, target: Path) -> bool:
    try:
        shutil.copyfile(source, target)
    except FileNotFoundError:
        return False
    return True


async def diff_files(worktree: Path, against: str) -> tuple[FileChange, ...]:
    """Every file that differs between commit ``against`` and the working tree."""
    async with scratch_index(worktree) as env:
        numstat, names = await asyncio.gather(
            git("diff", *_PLAIN_DIFF, "-z", "--numstat", against, cwd=worktree, env=env),
            git("diff", *_PLAIN_DIFF, "-z", "--name-status", against, cwd=worktree, env=env),
        )
    counts = parse_numstat(numstat.stdout)
    fields = names.stdout.decode("utf-8", "surrogateescape").split("\0")
    changes = []
    for code, path in zip(fields[0::2], fields[1::2], strict=False):
        if path:
            insertions, deletions = counts.get(path, (None, None))
            changes.append(
                FileChange(path, _STATUS.get(code[:1], "modified"), insertions, deletions)
            )
    return tuple(sorted(changes, key=lambda change: change.path))


def parse_numstat(output: bytes) -> dict[str, tuple[int | None, int | None]]:
    """``git diff -z --numstat`` (without renames): path -> (insertions, deletions)."""
    counts: dict[str, tuple[int | None, int | None]] = {}
    for record in output.decode("utf-8", "surrogateescape").split("\0"):
        added, _, rest = record.partition("\t")
        deleted, _, path = rest.partition("\t")
        if path:  # binary files count as "-\t-"
            counts[path] = (
                int(added) if added.isdigit() else None,
                int(deleted) if deleted.isdigit() else None,
            )
    return counts


async def diff_patch(worktree: Path, against: str) -> bytes:
    """A patch from commit ``against`` to the working tree, untracked files included, that
    ``git apply`` re-applies (binary files as binary patches)."""
    async with scratch_index(worktree) as env:
        result = await git("diff", *_PLAIN_DIFF, "--binary", against, cwd=worktree, env=env)
    return result.stdout


async def folder_patch(folder: Path) -> bytes:
    """A patch that recreates every file in a plain folder (``git apply`` in an empty one).

    A throwaway repository outside the folder does the work; nothing is written into it.
    """
    repo = Path(await asyncio.to_thread(tempfile.mkdtemp, prefix="harness-scratch-"))
    env = {"GIT_DIR": str(repo / "git"), "GIT_WORK_TREE": str(folder)}
    try:
        await git("init", "--quiet", cwd=repo, env=env)
        await git("add", "--all", "--intent-to-add", cwd=folder, env=env)
        result = await git("diff", *_PLAIN_DIFF, "--binary", cwd=folder, env=env)
    finally:
        await asyncio.to_thread(shutil.rmtree, repo, True)
    return result.stdout
