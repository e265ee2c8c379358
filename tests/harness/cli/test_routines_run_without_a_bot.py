"""``harness routines run NAME`` as people type it, with no bot running: it says so at once,
starts nothing and leaves no request behind; on a paused routine it says the routine is
paused and starts nothing either."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from harness.project import load_project
from harness.routines.state import RoutineStates
from harness.testing import spawn
from tests.routine_support import with_routines

pytestmark = pytest.mark.subprocess

NIGHTLY = """\
  - name: nightly
    schedule: "0 2 * * *"
    channel: C0ROUTINE
    owner: U0OWNER
    role: developer
    prompt: "Find the flakiest test and fix it."
"""


@pytest.fixture
def config(project_dir: Path) -> Path:
    return with_routines(project_dir / "config.yaml", NIGHTLY)


def harness(config: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return spawn.run(
        [sys.executable, "-m", "harness", "--config", str(config), *args],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip


def left_behind(config: Path) -> list[str]:
    tasks_dir = load_project(config).config.tasks_dir
    requests = RoutineStates(tasks_dir).requests
    made = [p.name for p in requests.iterdir()] if requests.exists() else []
    return made + [str(p) for p in tasks_dir.glob("*/task.json")]


def test_run_with_no_bot_running_says_so_at_once_and_leaves_nothing_behind(config: Path) -> None:
    done = harness(config, "routines", "run", "nightly")
    assert done.returncode != 0
    said = done.stderr + done.stdout
    assert "no bot is running with this config.yaml to run nightly; nothing was started" in said
    assert "start the bot (`harness bot`)" in said and "Traceback" not in said
    assert left_behind(config) == []
    assert RoutineStates(load_project(config).config.tasks_dir).read("nightly").runs == ()


def test_run_on_a_paused_routine_says_it_is_paused_and_starts_nothing(config: Path) -> None:
    assert harness(config, "routines", "pause", "nightly").returncode == 0
    done = harness(config, "routines", "run", "nightly")
    assert done.returncode != 0
    said = done.stderr + done.stdout
    assert "routine nightly is paused (paused by" in said and "nothing was started" in said
    assert "harness routines resume nightly" in said
    assert left_behind(config) == []
