"""No sandbox folder outlives its run: a `harness run` that ends leaves none in the temp
folder, and one killed mid-run (SIGKILL: nothing of it can clean up) has its folder swept by
the next harness that starts a sandbox. Real `harness run` processes, real bubblewrap, the
real CLI against the scripted model; the temp folder is the test's own (TMPDIR)."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.testing import spawn
from harness.testing.scripted_model import ModelRequest, ScriptedModel, Turn

pytestmark = [pytest.mark.slow, pytest.mark.subprocess]

WAIT = 60.0


def script(request: ModelRequest) -> Turn:
    if "never finishes" in request.first_user_text:
        return Turn(stall_seconds=120)
    return Turn.finish("Fixed it", ["app.py"])


@pytest.fixture
def model() -> Iterator[ScriptedModel]:
    with ScriptedModel.in_thread(script) as served:
        yield served


@pytest.fixture
def temp() -> Iterator[Path]:
    # Short: the egress socket's path in it must fit a Unix socket address.
    folder = Path(tempfile.mkdtemp(prefix="hs-", dir="/tmp"))
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def sandbox_folders(temp: Path) -> list[Path]:
    return sorted(temp.glob("harness-sandbox-*"))


def harness_env(model: ScriptedModel, temp: Path) -> dict[str, str]:
    return {**os.environ, **model.env(), "TMPDIR": str(temp)}


def test_a_run_killed_mid_run_has_its_sandbox_folder_swept_and_a_finished_run_leaves_none(
    project_dir: Path, model: ScriptedModel, temp: Path
) -> None:
    config = str(project_dir / "config.yaml")
    killed = spawn.Popen(
        [sys.executable, "-m", "harness", "run", "fix: this never finishes", "--config", config],
        env=harness_env(model, temp),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + WAIT
        while not model.requests and killed.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)  # polls for the agent's first model call, bounded
        assert model.requests, "the agent never called the model"
        left = sandbox_folders(temp)
        assert len(left) == 1, left
    finally:
        killed.send_signal(signal.SIGKILL)
        killed.wait()
    assert sandbox_folders(temp) == left  # SIGKILL: the run could not remove it

    finished = spawn.run(
        [sys.executable, "-m", "harness", "run", "fix the typo", "--config", config],
        env=harness_env(model, temp),
        capture_output=True,
        text=True,
        timeout=WAIT,
        check=False,
    )

    assert finished.returncode == 0, finished.stderr
    assert "developer completed" in finished.stdout
    assert sandbox_folders(temp) == []
