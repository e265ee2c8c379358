"""A test that hangs under `make test` (pytest-xdist) says where: its threads' and asyncio
tasks' stacks reach the session's output before pytest-timeout ends its worker."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO

pytestmark = pytest.mark.subprocess

STUCK = """
import asyncio
import pytest

async def waiting_on_what_never_comes() -> None:
    await asyncio.sleep(4)

@pytest.mark.anyio
async def test_stuck() -> None:
    await asyncio.create_task(waiting_on_what_never_comes(), name="the stuck step")
"""


def test_a_test_still_running_near_its_timeout_shows_its_stacks_under_xdist(
    tmp_path: Path,
) -> None:
    (tmp_path / "conftest.py").write_text(
        f"import sys\nsys.path.insert(0, {str(REPO)!r})\n"
        "from tests.conftest import a_hang_says_where, anyio_backend, pytest_configure\n",
        encoding="utf-8",
    )
    (tmp_path / "test_stuck.py").write_text(STUCK, encoding="utf-8")

    # A timeout of 16 s: the stacks come 15 s before it, while the test still runs.
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "anyio", "-n", "1", "-o", "timeout=16",
         "-p", "no:cacheprovider", "test_stuck.py"],
        cwd=tmp_path, capture_output=True, text=True, timeout=60,
    )  # fmt: skip

    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    said = done.stdout + done.stderr
    assert "+++ test_stuck.py::test_stuck still running after 1 s +++" in said
    assert "--- asyncio task the stuck step" in said
    assert "waiting_on_what_never_comes" in said  # where the task waits
    assert "(most recent call first)" in said  # every thread's stack too
