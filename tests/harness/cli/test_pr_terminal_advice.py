"""`harness pr` as a terminal user meets it: on a task with no repository it says how to get
one from the terminal (not only from a Slack thread), and its help names GITHUB_TOKEN."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.tasks.store import FileTaskStore
from harness.testing import spawn
from harness.testing.records import make_record

pytestmark = pytest.mark.subprocess


def harness(*args: str) -> subprocess.CompletedProcess[str]:
    return spawn.run(
        [sys.executable, "-m", "harness", *args],
        capture_output=True,
        text=True,
        timeout=60,
        env=dict(os.environ),
        stdin=subprocess.DEVNULL,
        check=False,
    )


def scratch_task(project_dir: Path) -> str:
    async def create() -> str:
        store = FileTaskStore(project_dir / ".agents" / "tasks")
        try:
            slug = (await store.create("tidy the notes")).slug
            await store.save_dispatch(slug, make_record("a1", status="completed"))
            return slug
        finally:
            await store.close()

    return asyncio.run(create())


def test_pr_on_a_task_without_a_repository_says_how_to_start_one_from_the_terminal(
    project_dir: Path,
) -> None:
    slug = scratch_task(project_dir)

    done = harness("pr", slug, "--config", str(project_dir / "config.yaml"))

    assert done.returncode == 1
    assert done.stderr.splitlines() == [
        f"harness: task {slug} has no repository: its agents worked in a scratch folder",
        '  fix: start the work as a task on a repository: `harness run "repo:NAME ..."` (NAME '
        "from `workspaces.repositories` in config.yaml), then `harness pr` its slug",
    ]


def test_pr_help_names_the_token_variable() -> None:
    done = harness("pr", "--help")

    assert done.returncode == 0
    assert "$GITHUB_TOKEN" in " ".join(done.stdout.split())
