"""`make demo-cluster` uses both of its workers: the analyst on one, the developer it drafts
on the other, each said in the transcript and each leaving its workspace on its own worker.
The demo as people run it, a process with its NATS server and two `harness worker`s."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.bot.conftest import clean_env

pytestmark = [pytest.mark.slow, pytest.mark.subprocess, pytest.mark.nats]


def test_the_cluster_demo_runs_the_analyst_and_its_developer_on_different_workers(
    project_dir: Path,
) -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "bot.demo",
            "--cluster",
            "--config",
            str(project_dir / "config.yaml"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        env=clean_env(),
        check=False,
    )

    assert done.returncode == 0, done.stdout + done.stderr
    placed = dict(re.findall(r"^demo: (product-analyst|developer) \w+ runs on (worker-\w)$",
                             done.stdout, re.MULTILINE))  # fmt: skip
    assert set(placed) == {"product-analyst", "developer"}, done.stdout
    assert set(placed.values()) == {"worker-a", "worker-b"}, done.stdout
    [task] = (project_dir / ".agents" / "tasks").glob("*/task.json")
    workers = project_dir / ".agents" / "workspaces" / ".demo-workers"
    used = sorted(folder.parent.name for folder in workers.glob(f"worker-*/{task.parent.name}"))
    assert used == ["worker-a", "worker-b"]
