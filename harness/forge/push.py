"""Pushing a task's branch to its repository's remote, with the harness's own credentials.

Never inside an agent's sandbox: the harness runs git itself, disarmed (no hook, fsmonitor
or other program from a config), from the repository that holds the task's branch (a
``path`` repository itself, or a ``url`` one's cache clone), never from a worktree: so no
config an agent could write (a worktree's ``config.worktree``, its admin folder) is read,
and no submodule is pushed or looked into. The process gets none of the harness's secrets
(``harness.git.git_env``); a token is handed to that one git process as an HTTP header in
``GIT_CONFIG_*`` variables of its environment, never on a command line, in a file or to a
credential helper. What git says when it refuses becomes one ``ForgeError`` with the fix.
"""

from __future__ import annotations

import base64
import re
from pathlib import Path

from harness.config.settings import RepositorySettings
from harness.errors import ForgeError
from harness.git import config_env, git

PUSH_TIMEOUT_SECONDS = 120.0

_NOT_FAST_FORWARD = re.compile(r"non-fast-forward|fetch first|\[rejected\]")
_PROTECTED = re.compile(r"protected branch|GH006|pre-receive hook declined", re.IGNORECASE)
_AUTH = re.compile(
    r"Authentication failed|could not read Username|terminal prompts disabled|"
    r"Permission denied|requested URL returned error: 40[13]|Invalid username or password",
    re.IGNORECASE,
)
_UNREACHABLE = re.compile(
    r"Could not resolve host|Connection refused|timed out|unable to access|"
    r"does not appear to be a git repository|Could not read from remote",
    re.IGNORECASE,
)


def source_of(repo: RepositorySettings) -> Path:
    """The git repository holding the task branches of ``repo``."""
    source = repo.folder
    if source is None:  # parse_config always sets one of them
        raise ForgeError("no-branch", f"repository {repo.name} has no folder", fix="check config")
    return source


def credential_env(token: str | None) -> dict[str, str]:
    """git's environment carrying ``token`` as GitHub's HTTPS push header (none: nothing)."""
    if not token:
        return {}
    basic = base64.b64encode(f"x-access-token:{token}".encode()).decode("ascii")
    # Nothing on this machine may answer for the token instead (a credential helper).
    settings = (f"http.extraHeader=AUTHORIZATION: basic {basic}", "credential.helper=")
    return {**config_env(settings), "GIT_ASKPASS": "", "SSH_ASKPASS": ""}


def remote_of(repo: RepositorySettings) -> str:
    """Where the branches go: a ``url`` repository's address, a ``path`` one's remote."""
    return repo.url or repo.remote


async def push_branch(repo: RepositorySettings, branch: str, *, token: str | None) -> str:
    """Pushes ``branch`` to the repository's remote; the commit pushed. Refusals raise
    ForgeError saying why and what to do; nothing local changes either way."""
    source = source_of(repo)
    head = await git("rev-parse", "--verify", "--quiet", f"refs/heads/{branch}^{{commit}}",
                     cwd=source, check=False)  # fmt: skip
    if not head.ok:
        raise ForgeError(
            "no-branch",
            f"repository {repo.name} has no branch {branch}",
            fix="run an agent on the task first: its work is committed on that branch",
        )
    remote = remote_of(repo)
    refspec = f"refs/heads/{branch}:refs/heads/{branch}"
    result = await git(
        "push", "--porcelain", "--no-verify", "--no-recurse-submodules", "--", remote, refspec,
        cwd=source, env=credential_env(token), check=False, timeout=PUSH_TIMEOUT_SECONDS,
    )  # fmt: skip
    if not result.ok:
        raise refusal(repo, branch, result.stderr + "\n" + result.text)
    return head.text


def refusal(repo: RepositorySettings, branch: str, said: str) -> ForgeError:
    """git's refusal of a push, as what happened and what to do (pure)."""
    lines = [line.strip() for line in said.splitlines() if line.strip()]
    last = next((line for line in reversed(lines) if not line.startswith("Done")), "no message")
    where = f"{remote_of(repo)} ({repo.name})"
    if _PROTECTED.search(said):
        return ForgeError(
            "forbidden",
            f"{where} refused the push of {branch}: the branch is protected ({last})",
            fix="let the harness's account push `harness/*` branches, or lift the protection "
            "of that branch name",
        )
    if _NOT_FAST_FORWARD.search(said):
        return ForgeError(
            "rejected",
            f"{where} has commits on {branch} that the task's branch lacks (someone pushed "
            "to it), so the push was refused",
            fix=f"bring them into the task (`git pull` on {branch} in the task's worktree) or "
            f"delete {branch} on the remote, then push again",
        )
    if _AUTH.search(said):
        return ForgeError(
            "credentials",
            f"{where} refused the harness's credentials for the push of {branch} ({last})",
            fix="give the bot a token that may push to the repository (the repository's "
            "`github.tokenEnv`, GITHUB_TOKEN by default), or an SSH key for an SSH remote",
        )
    if _UNREACHABLE.search(said):
        return ForgeError(
            "unavailable",
            f"could not push {branch} to {where}: {last}",
            fix=f"check the remote `{remote_of(repo)}` (`git remote -v` in {source_of(repo)}) "
            "and the network, then push again",
        )
    return ForgeError(
        "rejected", f"the push of {branch} to {where} failed: {last}", fix="push again"
    )
