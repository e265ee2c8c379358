"""The repository side of a task's worktree: the source folder (a local repository, or the
cache a `url` repository is cloned and fetched into), the base commit, adding the worktree and
checking its files out. Internal to the workspaces, which serialise these per repository.

What runs over the network (a clone, a fetch) is async, so a cancelled caller ends it at once;
the rest is blocking (``git_now``), each a part of a whole operation its caller runs in one
worker thread (``harness.blocking``).
"""

from __future__ import annotations

import asyncio
import logging
import os
from pathlib import Path

from harness.boundary.git_work import index_or_files
from harness.config.settings import RepositorySettings
from harness.errors import GitError, WorkspaceError
from harness.git import git, git_now
from harness.workspaces.files import (
    make_scratch,
    make_temp_beside,
    move_into_place,
    remove_tree,
    touch,
    worktree_admin_dir,
)
from harness.workspaces.values import BRANCH_PREFIX

logger = logging.getLogger(__name__)

_BASE_KEY = "harnessBase"  # branch.<branch>.harnessBase in the repository's config
# Task branches other harnesses (or this one) pushed to a `url` repository's remote are
# never fetched into its cache: every task's sandbox is shown the cache's refs.
_NOT_TASKS = f"^refs/heads/{BRANCH_PREFIX}*"


def check_local(repo: RepositorySettings, path: Path) -> None:
    """A `path` repository must exist and be a git repository (blocking)."""
    field = f"`workspaces.repositories.{repo.name}.path`"
    if not path.is_dir():
        raise WorkspaceError(
            f"repository {repo.name!r}: {path} does not exist",
            fix=f"clone the repository there, or correct {field} in config.yaml",
        )
    if not git_now("rev-parse", "--git-dir", cwd=path, check=False).ok:
        raise WorkspaceError(
            f"repository {repo.name!r}: {path} is not a git repository",
            fix=f"point {field} in config.yaml at a git checkout",
        )


async def clone(url: str, cache: Path) -> None:
    """Clone ``url`` into ``cache``: bare (worktrees hold the files), with remote-tracking
    branches like a normal clone's. The clone is made beside the cache and renamed into place,
    so a clone cut short never passes for a cache."""
    logger.info("cloning %s into %s", url, cache)
    temp = await asyncio.to_thread(make_temp_beside, cache)
    fix = f"check the url, and that it is reachable without a password prompt: {url}"
    try:
        await git("clone", "--quiet", "--bare", "--", url, str(temp), cwd=temp.parent, fix=fix)
        await git("config", "remote.origin.fetch", "+refs/heads/*:refs/remotes/origin/*", cwd=temp)
        await git("config", "--add", "remote.origin.fetch", _NOT_TASKS, cwd=temp)
        await git("fetch", "--quiet", "origin", cwd=temp, fix=fix)
        await asyncio.to_thread(move_into_place, temp, cache)
    finally:
        await asyncio.to_thread(remove_tree, temp)


async def fetch(url: str, cache: Path) -> None:
    logger.info("fetching %s into %s", url, cache)
    fix = f"check that {url} is reachable; delete {cache} to clone it again"
    await _fetch_no_tasks(cache)
    await git("fetch", "--quiet", "--prune", "origin", cwd=cache, fix=fix)


async def _fetch_no_tasks(cache: Path) -> None:
    """A cache cloned before task branches were kept out of fetches: told to keep them out,
    and the remote's task branches it fetched then deleted (``--prune`` leaves them)."""
    specs = await git("config", "--get-all", "remote.origin.fetch", cwd=cache, check=False)
    if _NOT_TASKS in specs.text.splitlines():
        return
    await git("config", "--add", "remote.origin.fetch", _NOT_TASKS, cwd=cache)
    listed = await git(
        "for-each-ref", "--format=%(refname)", f"refs/remotes/origin/{BRANCH_PREFIX}", cwd=cache
    )
    for ref in listed.text.split():
        await git("update-ref", "-d", ref, cwd=cache, check=False)


def common_dir(source: Path | None) -> Path | None:
    """The resolved git directory shared by a repository and all its worktrees (blocking)."""
    if source is None or not source.is_dir():
        return None
    found = git_now(
        "rev-parse", "--path-format=absolute", "--git-common-dir", cwd=source, check=False
    )
    return Path(os.path.realpath(found.text)) if found.ok else None


def base_ref(repo: RepositorySettings) -> str:
    """The ref of the base branch (as fetched, for `url`) (pure)."""
    return f"{_branches(repo)}/{repo.base_branch}"


def _branches(repo: RepositorySettings) -> str:
    return "refs/remotes/origin" if repo.url else "refs/heads"


def resolve_base(source: Path, repo: RepositorySettings) -> str:
    """The commit new task branches start from: the base branch (as fetched, for `url`)
    (blocking)."""
    name = repo.base_branch
    # A local repository's base may also be any revision git knows, such as `origin/main`.
    for ref in [base_ref(repo)] if repo.url else [base_ref(repo), name]:
        found = git_now(
            "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}", cwd=source, check=False
        )
        if found.ok:
            return found.text
    listed = git_now(
        "for-each-ref", "--count=10", "--format=%(refname:lstrip=2)", _branches(repo), cwd=source
    )
    branches = ", ".join(listed.text.split()) or "none, it has no commits"
    raise WorkspaceError(
        f"repository {repo.name!r} has no branch {name!r} (its branches: {branches})",
        fix=f"set `workspaces.repositories.{repo.name}.baseBranch` in config.yaml to one of them",
    )


def branch_exists(source: Path, branch: str) -> bool:
    """Whether the repository has the branch (blocking)."""
    found = git_now(
        "rev-parse", "--verify", "--quiet", f"refs/heads/{branch}", cwd=source, check=False
    )
    return found.ok


def stored_base(source: Path, branch: str) -> str | None:
    """The base commit recorded in the repository at ``source`` when ``branch`` was made;
    None when none was, or the repository's folder is gone (blocking)."""
    if not source.is_dir():
        return None
    found = git_now("config", "--get", f"branch.{branch}.{_BASE_KEY}", cwd=source, check=False)
    return found.text or None


def store_base(source: Path, branch: str, commit: str) -> None:
    """Records ``commit`` as the base of ``branch`` (blocking)."""
    git_now("config", f"branch.{branch}.{_BASE_KEY}", commit, cwd=source)


def add_worktree(source: Path, *args: str) -> None:
    """``git worktree add --no-checkout args``; the files come with :func:`populate`
    (blocking)."""
    fix = "see git's message; `git worktree list` in the repository lists its worktrees"
    command = ("worktree", "add", "--quiet", "--no-checkout", *args)
    first = git_now(*command, cwd=source, check=False)
    if first.ok:
        return
    if "already" not in first.stderr:
        raise GitError(command, source, first.stderr, fix=fix)
    # A worktree deleted by hand stays registered, holding its branch, until pruned.
    git_now("worktree", "prune", cwd=source)
    git_now(*command, cwd=source, fix=fix)


def populate(path: Path) -> None:
    """Check the files out into a worktree the harness just added with ``--no-checkout`` (it
    has no index yet), never one an agent worked in (``boundary.git_work.fill``) (blocking).

    When files are there already (a crash between adding and filling), only the index is
    built, so whatever is in the folder stays as it is.
    """
    index = git_now("rev-parse", "--path-format=absolute", "--git-path", "index", cwd=path)
    found = index_or_files(Path(index.text), path)
    if found != "index":
        git_now("reset", "--quiet", *(() if found == "files" else ("--hard",)), cwd=path)


# --- whole operations, each run in one worker thread (``harness.blocking.run_whole``) -----


def add_task_worktree(source: Path, repo: RepositorySettings, path: Path, branch: str) -> str:
    """A new task's worktree at ``path`` on its ``branch``, from the base branch's head or,
    when an earlier prune kept the branch, on its committed work; the task's base commit,
    recorded with the branch (blocking, under the repository's lock)."""
    base = resolve_base(source, repo)
    path.parent.mkdir(parents=True, exist_ok=True)
    if branch_exists(source, branch):
        # Kept by an earlier prune: the task continues its committed work.
        add_worktree(source, str(path), branch)
        base_commit = stored_base(source, branch)
        if base_commit is None:
            base_commit = git_now("merge-base", branch, base, cwd=source).text
    else:
        add_worktree(source, "-b", branch, str(path), base)
        base_commit = base
    store_base(source, branch, base_commit)
    return base_commit


def populated(path: Path) -> str | None:
    """The worktree at ``path`` with its files checked out (:func:`populate`) and touched (a
    task's, in use); its admin folder (blocking)."""
    populate(path)
    touch(path)
    return worktree_admin_dir(path)


def scratch_folder(path: Path, *, new: bool) -> None:
    """A task's scratch folder at ``path``, touched; ``new``: made, as a git repository of
    its own, so git in it never finds the one the workspaces root may sit in (the harness's
    checkout, the team's app) (blocking)."""
    make_scratch(path)
    if new:
        git_now("init", "--quiet", cwd=path)
    touch(path)
