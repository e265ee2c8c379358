"""git over what an agent wrote: its worktree (files, index, HEAD) and a scratch folder.

Rule: no git the harness runs here starts a program an agent could have configured, and none
gets a secret. So every call

- reads no system or global config (``GIT_CONFIG_NOSYSTEM``, ``GIT_CONFIG_GLOBAL=/dev/null``)
  and gets of the process's environment only PATH and HOME (identities are given);
- turns off on its command line, which beats every config file, each setting that names a
  program or sends git elsewhere (``HARDENING``);
- names its git directory, common directory and work tree itself (``Tree``): a worktree's
  only after checking they are the ones ``git worktree add`` made in a repository outside
  the workspaces (``confine``), a scratch folder's never its own ``.git`` (which is data);
- never descends into a nested repository: submodules are ignored by every status and diff,
  and gitlinks and nested repositories are left out of every ``add`` (``git_work.nested``).

What stays is config no agent can write: a worktree's repository's own (read-only in the
sandbox), so a filter or diff driver the tree's ``.gitattributes`` names is the operator's.
A repository using ``extensions.worktreeConfig`` would read the worktree's
``config.worktree`` (writable in the sandbox): such a file is refused.

What an agent changed, read and recorded with this git, is ``git_work``'s.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from harness.boundary.confined import worktree_git_dirs
from harness.errors import WorkspaceError
from harness.git import GitResult, config_env, git

logger = logging.getLogger(__name__)

# Every setting git documents that runs a program, fetches, or reads a file a program could
# be named in, as the harness wants it. A driver under a name of the config's choosing
# (``filter.<name>.clean``, ``diff.<name>.textconv``, ``merge.<name>.driver``) cannot be
# listed: no config an agent writes is read, and diffs take --no-textconv --no-ext-diff.
HARDENING = (
    "core.fsmonitor=false",
    "core.hooksPath=/dev/null",
    "core.untrackedCache=false",
    "core.pager=cat",
    "core.editor=:",
    "sequence.editor=:",
    "core.sshCommand=false",
    "core.gitProxy=",
    "core.askPass=",
    "core.alternateRefsCommand=",
    "core.alternateRefsPrefixes=",
    "core.attributesFile=/dev/null",
    "credential.helper=",
    "diff.external=",
    "diff.ignoreSubmodules=all",
    "diff.noprefix=false",
    "gpg.program=false",
    "gpg.openpgp.program=false",
    "gpg.x509.program=false",
    "gpg.ssh.program=false",
    "gpg.ssh.defaultKeyCommand=",
    "commit.gpgSign=false",
    "tag.gpgSign=false",
    "log.showSignature=false",
    "submodule.recurse=false",
    "status.submoduleSummary=false",
    "fetch.recurseSubmodules=false",
    "push.recurseSubmodules=no",
    "protocol.allow=never",
    "protocol.ext.allow=never",
    "protocol.file.allow=never",
    "init.templateDir=",
    "gc.auto=0",
    "maintenance.auto=false",
)
_HARDENING_ARGS = tuple(arg for setting in HARDENING for arg in ("-c", setting))
# The environment that goes with it: no config file but the repository's, no program from
# the environment (pager, editor, askpass), no replacement objects.
_ENV = {
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_CONFIG_GLOBAL": "/dev/null",
    "GIT_ATTR_NOSYSTEM": "1",
    "GIT_PAGER": "cat",
    "GIT_EDITOR": ":",
    "GIT_ASKPASS": "",
    "SSH_ASKPASS": "",
    "GIT_NO_REPLACE_OBJECTS": "1",
    "GIT_PROTOCOL_FROM_USER": "0",
}
IGNORE_SUBMODULES = "--ignore-submodules=all"
# The one folder under the workspaces' root that holds repositories (a `url` one's cache);
# no agent's sandbox shows it.
CACHES = ".repos"


class UntrustedGitError(WorkspaceError):
    """A worktree's git is not as ``git worktree add`` made it: ``reason`` says how."""

    def __init__(self, worktree: Path, reason: str) -> None:
        super().__init__(
            f"the git of the worktree {worktree} is not as the harness made it ({reason}): "
            "nothing of it was read or committed",
            fix=f"look at {worktree} before trusting it; the task's branch holds what was "
            "committed before",
        )
        self.reason = reason


class NestedRepositoryError(WorkspaceError):
    """Work that holds git repositories of its own, which the harness does not descend into:
    what would drop them is not done."""


@dataclass(frozen=True)
class Tree:
    """Where one git call over an agent's files works: every path named, none looked up."""

    work_tree: Path
    git_dir: Path
    common_dir: Path
    # Where new objects go, when not the repository's own store: a task's store, which no
    # other task's sandbox is shown (name, value pairs of git's object variables).
    objects: tuple[tuple[str, str], ...] = ()

    @property
    def env(self) -> dict[str, str]:
        return {
            "GIT_DIR": str(self.git_dir),
            "GIT_COMMON_DIR": str(self.common_dir),
            "GIT_WORK_TREE": str(self.work_tree),
            **dict(self.objects),
        }


async def run(
    tree: Tree,
    *args: str,
    env: Mapping[str, str] | None = None,
    check: bool = True,
    fix: str = "",
) -> GitResult:
    """``git args`` over ``tree``, hardened (the module's rule)."""
    return await git(
        *_HARDENING_ARGS,
        *args,
        cwd=tree.work_tree,
        env={**_ENV, **tree.env, **(env or {})},
        check=check,
        fix=fix,
        inherit=False,
    )


# --- which git directory ------------------------------------------------------------------


async def confine(worktree: Path, *, root: Path) -> Tree:
    """The git directories of ``worktree``, a linked worktree the harness made under
    ``root`` (the workspaces' root, which holds every folder an agent may write but its
    worktree's admin folder): WorkspaceError, nothing run, when its ``.git`` no longer leads
    to a repository outside ``root`` through the admin folder ``git worktree add`` made, or
    when that repository would read config the agent can write."""
    found = await asyncio.to_thread(_confined, worktree, root)
    if isinstance(found, str):
        raise UntrustedGitError(worktree, found)
    if await asyncio.to_thread(os.path.lexists, found.git_dir / "config.worktree"):
        # Read only with extensions.worktreeConfig, which the repository's own config sets.
        on = await git(
            *("config", "--file", str(found.common_dir / "config")),
            *("--bool", "--get", "extensions.worktreeConfig"),
            cwd=found.common_dir,
            env=_ENV,
            check=False,
            inherit=False,
        )
        if on.text == "true":
            raise WorkspaceError(
                f"the worktree {worktree} has a config of its own "
                f"({found.git_dir / 'config.worktree'}), which its agent can write and its "
                "repository reads (extensions.worktreeConfig): nothing of it was read or "
                "committed",
                fix=f"delete {found.git_dir / 'config.worktree'} after checking it, or turn "
                "`extensions.worktreeConfig` off in the repository",
            )
    return found


def _confined(worktree: Path, root: Path) -> Tree | str:
    """``confine``'s checks, on the file system. Blocking."""
    found = worktree_git_dirs(worktree)
    if isinstance(found, str):
        return found
    admin, common = found
    root = Path(os.path.realpath(root))
    if _inside(common, root) and not _inside(common, root / CACHES):
        return f"its repository {common} is inside the workspaces, where agents write"
    for folder in common.parents:  # a repository made in another one's admin folder
        if folder.name == "worktrees" and (folder.parent / "HEAD").is_file():
            return f"its repository {common} is inside {folder}, another one's worktrees"
    if not (common / "HEAD").is_file() or not (common / "objects").is_dir():
        return f"{common} is not a git repository"
    return Tree(worktree, admin, common)


def _inside(path: Path, folder: Path) -> bool:
    return path == folder or folder in path.parents


# --- commands that are not the harness's own git ------------------------------------------


def disarmed_env(cwd: Path) -> dict[str, str]:
    """The environment for a command the harness runs in an agent's folder outside any
    sandbox (a metadata field, where bubblewrap cannot run): PATH, HOME and a fixed locale
    alone; every git it starts reads no system or global config and takes ``HARDENING``
    (``GIT_CONFIG_*`` count as ``-c``); no repository above the folder. A config the folder's
    own ``.git`` holds is still read: only the sandbox keeps that from the harness."""
    env = {key: os.environ[key] for key in ("PATH", "HOME") if key in os.environ}
    env.update(_ENV)
    env.update(LANG="C.UTF-8", LC_ALL="C.UTF-8", GIT_TERMINAL_PROMPT="0", GIT_OPTIONAL_LOCKS="0")
    env["GIT_CEILING_DIRECTORIES"] = str(cwd.parent)
    env.update(config_env(HARDENING))
    return env
