"""Tasks apart in git: an agent's sandbox shows only its own task's branch and the base it
started from, whatever git command it runs. Task t-1's agent commits a secret on its branch
and leaves another in its index; the operator packs the repository; task t-2's agent, in a
worktree of the same repository, then looks for them every way git and the shell offer.

Real parts, as in ``test_escapes.py``: the Claude Code CLI in real bubblewrap against the
scripted model, placed by the agent host in real git worktrees, in this process and on a
``harness worker`` over a real NATS server; every tool call approved.
"""

from __future__ import annotations

import pytest

from tests.harness.sandbox.conftest import Rig
from tests.support import git

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

COMMITTED = "CANARY-committed-7f3a9c"
STAGED = "CANARY-staged-5e1d0b"
COMMON = "$(git rev-parse --git-common-dir)"


async def test_a_task_sees_no_other_tasks_commits_refs_worktrees_or_index(rig: Rig) -> None:
    outcome, results = await rig.run(
        f"echo {COMMITTED} > secret.txt && git add secret.txt"
        f" && git commit -q -m 'secret {COMMITTED}' && echo ok",
        f"echo {STAGED} > staged.txt && git add staged.txt && echo ok",
        slug="t-1",
    )
    assert outcome.status == "completed", outcome.error
    assert [r.strip() for r in results] == ["ok", "ok"]
    assert git(rig.repository, "show", "harness/t-1:secret.txt") == COMMITTED
    # As an operator might: every ref packed, every object of the repository's own packed.
    git(rig.repository, "gc", "--quiet")
    git(rig.repository, "pack-refs", "--all")
    assert "refs/heads/harness/t-1" in (rig.repository / ".git/packed-refs").read_text()

    outcome, results = await rig.run(
        "git cat-file --batch-all-objects --batch-check",
        "git cat-file --batch-all-objects --batch",
        "git log --all --format='%H %D %s %b'",
        "git for-each-ref",
        f"cat {COMMON}/packed-refs",
        f"ls -la {COMMON}/worktrees; cat -v {COMMON}/worktrees/*/HEAD",
        f"cat -v {COMMON}/worktrees/*/index {COMMON}/worktrees/*/logs/HEAD",
        f"ls -la {COMMON}/objects/info; cat {COMMON}/objects/info/alternates",
        "git show harness/t-1",
        "git rev-list --all",
        f"cat {COMMON}/info/refs; ls -R {COMMON} | head -200",
        "git branch -a; git worktree list; git config --list",
        "echo mine > mine.txt && git add mine.txt && git commit -q -m mine && echo ok",
        slug="t-2",
    )

    assert outcome.status == "completed", outcome.error
    # Every object of t-1's work: its agent's commit, the harness's commit of what the agent
    # left uncommitted, their trees and blobs.
    made = git(rig.repository, "rev-list", "--objects", "--no-object-names", "harness/t-1",
               "--not", "main").split()  # fmt: skip
    listed = {line.split()[0] for line in results[0].splitlines() if line.strip()}
    assert len(made) >= 6 and not listed & set(made)
    every = "\n".join(results)
    assert not [commit for commit in made[:2] if commit in every]
    assert "Task: t-1" not in every
    for secret in (COMMITTED, STAGED, "harness/t-1", "worktrees/t-1"):
        shown = [i for i, result in enumerate(results) if secret in result]
        # `git show harness/t-1` names the branch it was asked for, as one it does not know.
        assert shown == ([8] if secret == "harness/t-1" else []), f"{secret!r} is shown to t-2"
    assert "unknown revision" in results[8]
    assert "refs/heads/harness/t-2" in results[3]  # its own branch is there
    assert results[-1].strip() == "ok"  # and its own work still commits, onto its branch
    assert git(rig.repository, "show", "harness/t-2:mine.txt") == "mine"
    # The repository holds both tasks' work, whole.
    assert git(rig.repository, "show", "harness/t-1:staged.txt") == STAGED
    assert git(rig.repository, "show", "harness/t-1~1:secret.txt") == COMMITTED
    git(rig.repository, "fsck", "--strict", "--no-dangling")
    assert COMMITTED in git(rig.repository, "log", "--all", "--format=%s")
