"""Running git: every git process the harness starts, over the repositories it was configured
with and their git directories (the workspaces, a push) and, hardened on top of this, over
what an agent wrote (``harness.boundary.git`` adds its rules for that git).

Every git call is a subprocess: :func:`git` from async code (``asyncio.create_subprocess_exec``,
so the event loop never waits on git), :func:`git_now` inside a whole blocking operation that
runs in a worker thread. Each call gets a fixed locale (so error text can be recognised), no
terminal prompt (a clone needing credentials fails instead of hanging), no optional locks (a
status never takes the agent's index lock) and none of the caller's ``GIT_DIR``-style variables.
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
import subprocess
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.errors import GitError, WorkspaceError
from harness.retry import Backoff, retrying, retrying_now
from harness.waits import within

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


class _LockHeldError(Exception):
    """A git call failed because another git process held a lock: worth another try."""

    def __init__(self, result: GitResult) -> None:
        super().__init__(result.stderr)
        self.result = result


def _call_env(cwd: Path, env: Mapping[str, str] | None, inherit: bool) -> dict[str, str]:
    # Never a repository above ``cwd``: a worktree whose .git its agent deleted must not send
    # the harness's git to an enclosing checkout (the operator's).
    guarded = {"GIT_CEILING_DIRECTORIES": str(Path(cwd).absolute().parent), **(env or {})}
    return git_env(guarded, inherit=inherit)


def _lock_held(result: GitResult) -> GitResult:
    """``result``, or _LockHeldError when another git process held a lock."""
    if not result.ok and _LOCK_ERROR.search(result.stderr):
        raise _LockHeldError(result)
    return result


def _retried(args: Sequence[str], cwd: Path) -> Callable[[BaseException, float], None]:
    def held(_exc: BaseException, delay: float) -> None:
        logger.debug("git %s in %s: lock held, retrying in %.2f s", args[0], cwd, delay)

    return held


def _checked(result: GitResult, args: Sequence[str], cwd: Path, check: bool, fix: str) -> GitResult:
    if check and not result.ok:
        logger.debug("git %s in %s failed: %s", " ".join(args), cwd, result.stderr.strip())
        raise GitError(
            tuple(args), cwd, result.stderr, fix=fix or "fix what git reports, then retry"
        )
    return result


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
    call_env = _call_env(cwd, env, inherit)

    async def once() -> GitResult:
        return _lock_held(await _run((*_DISARMING, *args), cwd, call_env, timeout))

    try:
        result = await retrying(
            once,
            retry_on=_LockHeldError,
            backoff=_LOCK_BACKOFF,
            attempts=_LOCK_RETRIES + 1,
            on_retry=_retried(args, cwd),
        )
    except _LockHeldError as still:  # held all along: git's failure, as any other
        result = still.result
    return _checked(result, args, cwd, check, fix)


def git_now(
    *args: str,
    cwd: Path,
    env: Mapping[str, str] | None = None,
    check: bool = True,
    fix: str = "",
    timeout: float = TIMEOUT_SECONDS,
) -> GitResult:
    """:func:`git`, blocking: for a whole local operation (several git calls and the folder
    work between them) run in one worker thread. What can take long, a clone or a fetch
    over the network, runs through :func:`git`, which a cancelled caller ends at once."""
    call_env = _call_env(cwd, env, True)

    def once() -> GitResult:
        return _lock_held(_run_now((*_DISARMING, *args), cwd, call_env, timeout))

    try:
        result = retrying_now(
            once,
            retry_on=_LockHeldError,
            backoff=_LOCK_BACKOFF,
            attempts=_LOCK_RETRIES + 1,
            on_retry=_retried(args, cwd),
        )
    except _LockHeldError as still:
        result = still.result
    return _checked(result, args, cwd, check, fix)


def _not_started(exc: FileNotFoundError, cwd: Path) -> WorkspaceError:
    # Python names the folder when changing into it failed, else the program.
    if exc.filename is not None and str(exc.filename) == str(cwd):
        return WorkspaceError(f"{cwd} does not exist", fix="prepare the task's workspace again")
    return WorkspaceError("git is not installed (no `git` on PATH)", fix="install git")


def _too_long(args: Sequence[str], cwd: Path, timeout: float) -> WorkspaceError:
    return WorkspaceError(
        f"`git {' '.join(args)}` in {cwd} took longer than {timeout:.0f} s",
        fix="check the repository and the network, then try again",
    )


def _run_now(args: tuple[str, ...], cwd: Path, env: dict[str, str], timeout: float) -> GitResult:
    try:
        # On a timeout, ``run`` kills git and waits for its end.
        done = subprocess.run(
            ["git", *args],
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=timeout,
            check=False,
        )
    except FileNotFoundError as exc:
        raise _not_started(exc, cwd) from exc
    except subprocess.TimeoutExpired:
        raise _too_long(args, cwd, timeout) from None
    return GitResult(done.returncode, done.stdout, done.stderr.decode("utf-8", "replace"))


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
        raise _not_started(exc, cwd) from exc
    # Reading goes on whatever happens to the caller: a read cut short leaves git's pipes
    # open, and a git left running would hold its locks with nobody waiting for it.
    reading = asyncio.ensure_future(proc.communicate())
    try:
        stdout, stderr = await within(asyncio.shield(reading), timeout)
    except TimeoutError:
        await _kill(proc, reading)
        raise _too_long(args, cwd, timeout) from None
    except BaseException:  # cancelled
        await _kill(proc, reading)
        raise
    return GitResult(proc.returncode or 0, stdout, stderr.decode("utf-8", "replace"))


# Once git is killed its pipes end at once, unless a child it started still holds them.
_DRAIN_SECONDS = 5.0


async def _kill(proc: asyncio.subprocess.Process, reading: asyncio.Future[Any]) -> None:
    if proc.returncode is None:
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
    with contextlib.suppress(Exception):  # what it said no longer matters: only its end
        await within(asyncio.shield(reading), _DRAIN_SECONDS)
    await asyncio.shield(proc.wait())
