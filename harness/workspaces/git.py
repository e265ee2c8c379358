"""Running the harness's own git: over the repositories it was configured with and their
git directories, never over what an agent wrote (``harness.boundary.git`` runs that git).

Every git call is a subprocess (``asyncio.create_subprocess_exec``), so the event loop never
waits on git. Each call gets a fixed locale (so error text can be recognised), no terminal
prompt (a clone needing credentials fails instead of hanging), no optional locks (a status
never takes the agent's index lock) and none of the caller's ``GIT_DIR``-style variables.
Lock errors from another git process (``index.lock``, ``config.lock``, a ref lock) are retried
briefly; any other failure is a :class:`GitError` with git's own message.

No call gets a secret of the harness's process (tokens, the model's variables) nor the
caller's ``GIT_*`` settings: a program git starts (a remote's transport, an operator's
credential helper) sees only what it needs.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import re
from collections.abc import Mapping, Sequence
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
# Secrets of the harness's own process (its Slack, forge and model credentials: Bedrock's
# are AWS_*, Vertex's GOOGLE_*): git never needs them, and no program git might run may read
# them. A push gets its credential for that one call (``forge.push``).
_SECRETS = (
    "SLACK_",
    "ANTHROPIC_",
    "HARNESS_",
    "GITHUB_",
    "GH_",
    "CLAUDE_",
    "OPENAI_",
    "AWS_",
    "GOOGLE_",
    "VERTEX_",
    "NATS_",
)
# Variables that would hand git settings or programs of the caller's: the rule is that
# only what each call names applies.
_CALLERS_GIT = (
    "GIT_CONFIG_PARAMETERS",
    "GIT_CONFIG_COUNT",
    "GIT_CONFIG_KEY_",
    "GIT_CONFIG_VALUE_",
    "GIT_EXTERNAL_DIFF",
    "GIT_PAGER",
    "GIT_EDITOR",
    "GIT_EXEC_PATH",
)
# Whatever its prefix, a variable named like a credential is one.
_SECRET_SUFFIXES = ("_TOKEN", "_SECRET", "_PASSWORD", "_API_KEY", "_PRIVATE_KEY")
# What a git over an agent's files keeps of the process's environment (``inherit=False``).
_MINIMAL = ("PATH", "HOME")
# Programs a repository's config could make the harness's own git run that it never needs:
# turned off on every call's command line, which takes precedence over any config file.
# (git over an agent's files turns off far more: ``harness.boundary.git``.)
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


FileStatus = Literal["added", "modified", "deleted", "type changed"]


@dataclass(frozen=True)
class FileChange:
    """One file a task changed (read by ``harness.boundary.git``; a value of the reports)."""

    path: str  # relative to the worktree, as git spells it
    status: FileStatus
    insertions: int | None  # None for a binary file
    deletions: int | None


class WorkspaceError(HarnessError):
    """A workspace could not be prepared, read or removed."""


class TamperedWorkspaceError(WorkspaceError):
    """A worktree's ``.git`` was changed or removed (by its agent, say) since the harness made
    it: the harness does not trust it with its own git."""

    def __init__(self, workspace: Any, now: str | None, *, why: str | None = None) -> None:
        found = f"it names {now}" if now else "it is gone or unreadable"
        said = why or f"{found}, not {workspace.git_dir}"
        super().__init__(
            f"the .git of task {workspace.slug}'s worktree was changed ({said}): its work "
            "was neither read nor committed",
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


def git_env(extra: Mapping[str, str] | None = None, *, inherit: bool = True) -> dict[str, str]:
    """The environment of one git call: the process's without its secrets and ``GIT_*``
    settings (with ``inherit`` false only PATH and HOME), a fixed locale, then ``extra``."""
    env = {
        key: value
        for key, value in os.environ.items()
        if (inherit or key in _MINIMAL)
        and key not in _REDIRECTS
        and not key.startswith((*_SECRETS, *_CALLERS_GIT))
        and not key.endswith(_SECRET_SUFFIXES)
    }
    env.update(LC_ALL="C", LANGUAGE="C", GIT_TERMINAL_PROMPT="0", GIT_OPTIONAL_LOCKS="0")
    env.update(extra or {})
    return env


def config_env(settings: Sequence[str]) -> dict[str, str]:
    """``key=value`` settings as git's ``GIT_CONFIG_*`` variables: as ``-c`` on the command
    line (over every config file), for a git and every git it starts, without a command
    line that others can read."""
    env = {"GIT_CONFIG_COUNT": str(len(settings))}
    for index, setting in enumerate(settings):
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
    inherit: bool = True,
) -> GitResult:
    """Run ``git args`` in ``cwd``; with ``check`` a failure raises GitError carrying ``fix``.
    ``inherit`` false: of the process's environment only PATH and HOME (``git_env``)."""
    # Never a repository above ``cwd``: a worktree whose .git its agent deleted must not send
    # the harness's git to an enclosing checkout (the operator's).
    guarded = {"GIT_CEILING_DIRECTORIES": str(Path(cwd).absolute().parent), **(env or {})}
    for delay in (*_LOCK_BACKOFF.delays(_LOCK_RETRIES), None):
        result = await _run((*_DISARMING, *args), cwd, git_env(guarded, inherit=inherit), timeout)
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
