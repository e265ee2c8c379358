"""Escapes through the harness's own git: an agent in its sandbox sets up git so that the git
the harness runs over its worktree afterwards (outside the sandbox, with the harness's
environment) would run the agent's program. Real parts, as in ``test_escapes``: the Claude
Code CLI in real bubblewrap, placed by the agent host in a real git worktree, in this process
and on a ``harness worker`` over a real NATS server; every tool call approved.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.agents.metadata import MetadataCollector
from harness.config.settings import MetadataField
from tests.harness.sandbox.conftest import SLACK_TOKEN, Rig
from tests.support import git

pytestmark = [pytest.mark.anyio, pytest.mark.slow]


def nested_repository_with_a_filter(canary: Path) -> str:
    """The agent's Bash call: ``vendor/`` becomes a repository of its own, added to the
    worktree as a gitlink, whose config then filters every file through a program that
    writes its environment to ``canary``, with a file git must read again."""
    return f"""cat > /tmp/nest.sh <<'EOF'
set -e
unset GIT_OBJECT_DIRECTORY GIT_ALTERNATE_OBJECT_DIRECTORIES
mkdir vendor && cd vendor
git init -q
echo hi > a.txt
printf '* filter=x\\n' > .gitattributes
git add -A
git -c user.name=A -c user.email=a@example.com commit -q -m vendored
cd ..
git add vendor
cd vendor
FILTER="sh -c 'env > {canary}; cat'"
git config filter.x.clean "$FILTER"
git config filter.x.smudge "$FILTER"
touch -d @1000000000 a.txt
EOF
sh /tmp/nest.sh 2>&1 && echo work > work.txt && echo nested"""


async def test_a_nested_repositorys_filter_never_runs_in_the_harnesss_git(rig: Rig) -> None:
    canary = rig.outside / "canary"

    outcome, results = await rig.run(nested_repository_with_a_filter(canary))

    assert outcome.status == "completed", outcome.error
    assert "nested" in results[0], results[0]
    assert not canary.exists()
    written = [p.read_bytes() for p in rig.outside.parent.rglob("*") if p.is_file()]
    assert not any(SLACK_TOKEN.encode() in content for content in written)
    assert outcome.work is not None
    assert "vendor/: a git repository of its own, not committed" in outcome.work.diff_stat
    committed = git(rig.repository, "ls-tree", "-r", "--name-only", "harness/t-1").split()
    assert "work.txt" in committed and not any(p.startswith("vendor") for p in committed)
    worktree = rig.outside.parent / "workspaces" / "t-1"
    assert (worktree / "vendor" / "a.txt").read_text(encoding="utf-8") == "hi\n"


async def test_a_metadata_command_in_the_agents_folder_runs_nothing_the_agent_set_up(
    rig: Rig,
) -> None:
    canary = rig.outside / "canary"
    secret = rig.outside / "harness.env"
    secret.write_text(f"SLACK_BOT_TOKEN={SLACK_TOKEN}\n", encoding="utf-8")
    outcome, _ = await rig.run(
        nested_repository_with_a_filter(canary), f"ln -s {secret} VERSION && echo linked"
    )
    assert outcome.status == "completed", outcome.error
    worktree = rig.outside.parent / "workspaces" / "t-1"
    collector = MetadataCollector(
        [
            MetadataField("status", "git status --porcelain"),
            MetadataField("version", "cat VERSION"),
            MetadataField("env", "env"),
        ]
    )

    values = await collector.collect(worktree)

    assert not canary.exists()
    shown = repr({name: (value.value, value.error) for name, value in values.items()})
    assert SLACK_TOKEN not in shown
    assert values["status"].error is None, values["status"].error
