"""A pull request's head, brought into its repository as a task's branch: the branch a
reviewer's worktree is made on.

The harness fetches, with its own credentials, the pull request's head (GitHub's
``refs/pull/N/head``, else the head branch when it is in the same repository) from the
repository's remote into the repository that holds task branches (as ``push.py`` pushes
from it), then makes the task's branch at the head commit GitHub named; the worktree made
on it later holds the pull request's files as of that commit. git runs disarmed
(``harness.git``: no hook, fsmonitor or other program from a config), without tags or
submodules, writing no ref but the task's branch; the head branch's name (the pull
request's author chose it) is fetched only when it reads as a plain branch name.
"""

from __future__ import annotations

import re
from pathlib import Path

from harness.blocking import run_whole
from harness.config.settings import RepositorySettings
from harness.errors import ForgeError
from harness.forge.push import credential_env, remote_of, source_of
from harness.forge.reviews import PullDetail
from harness.git import git, git_now
from harness.workspaces.repos import branch_exists, store_base

FETCH_TIMEOUT_SECONDS = 300.0
_SHA = re.compile(r"^[0-9a-f]{40}$")
# A branch name that can only be read as a branch: no option, no range, no glob.
_BRANCH = re.compile(r"^(?!-)(?!.*\.\.)[A-Za-z0-9._/-]{1,200}$")


async def branch_at_head(
    repo: RepositorySettings, detail: PullDetail, branch: str, *, token: str | None
) -> str:
    """Makes ``branch`` (a task's, new) at the pull request's head commit, which is also
    its base; that commit. ForgeError when the head cannot be fetched."""
    if not _SHA.match(detail.head_sha):
        raise ForgeError("rejected", f"GitHub named no head commit for #{detail.number}",
                         fix="try again in a moment")  # fmt: skip
    source = source_of(repo)
    if not await _has(source, detail.head_sha):
        await _fetch_head(repo, detail, token)
    if not await _has(source, detail.head_sha):
        raise ForgeError(
            "rejected",
            f"the remote of {repo.name} does not have commit {detail.head_sha[:12]} of pull "
            f"request #{detail.number} (pushed again meanwhile?)",
            fix="ask for the review again: it takes the pull request's new head",
        )
    await run_whole(_branch_at, source, repo.name, branch, detail.head_sha)
    return detail.head_sha


def _branch_at(source: Path, repository: str, branch: str, commit: str) -> None:
    """A new ``branch`` at ``commit``, with ``commit`` as its base (blocking)."""
    if branch_exists(source, branch):
        raise ForgeError("rejected", f"{repository} has a branch {branch} already",
                         fix="ask for the review again")  # fmt: skip
    git_now("branch", "--no-track", branch, commit, cwd=source)
    # The task's own work is measured from the head: a reviewer changes nothing, so its
    # result shows no diff (nor offers the pull request's change as a pull request).
    store_base(source, branch, commit)


async def _fetch_head(repo: RepositorySettings, detail: PullDetail, token: str | None) -> None:
    said = await _fetch(repo, f"refs/pull/{detail.number}/head", token)
    if said is None:
        return
    same_repository = repo.github is not None and (
        detail.head_repo.lower() == repo.github.full_name.lower()
    )
    if same_repository and _BRANCH.match(detail.head_ref):
        said = await _fetch(repo, f"refs/heads/{detail.head_ref}", token)
    if said is not None:
        lines = [line.strip() for line in said.splitlines() if line.strip()]
        raise ForgeError(
            "unavailable",
            f"could not fetch pull request #{detail.number}'s head from {remote_of(repo)} "
            f"({repo.name}): {lines[-1] if lines else 'no message'}",
            fix=f"check the remote (`git remote -v` in {source_of(repo)}), the network and "
            "that the bot's token may read the repository, then ask again",
        )


async def _fetch(repo: RepositorySettings, ref: str, token: str | None) -> str | None:
    """Fetches ``ref`` of the remote (its objects: no ref here changes); what git said when
    it failed, None when it worked."""
    result = await git(
        "fetch", "--quiet", "--no-tags", "--no-recurse-submodules", "--no-write-fetch-head",
        "--", remote_of(repo), ref,
        cwd=source_of(repo), env=credential_env(token), check=False,
        timeout=FETCH_TIMEOUT_SECONDS,
    )  # fmt: skip
    return None if result.ok else result.stderr + "\n" + result.text


async def _has(source: Path, sha: str) -> bool:
    found = await git("cat-file", "-e", f"{sha}^{{commit}}", cwd=source, check=False)
    return found.ok
