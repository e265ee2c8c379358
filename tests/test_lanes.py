"""Under `make test` (pytest-xdist) the tests that mostly wait run on lanes of their own, so
that they no longer hold the workers that keep the CPU busy."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO
from tests.lanes import split_lanes

TESTS = """
import os
from pathlib import Path

import pytest

def ran(name: str) -> None:
    with Path("ran.txt").open("a", encoding="utf-8") as file:
        file.write(f"{name} {os.environ['PYTEST_XDIST_WORKER']}\\n")

@pytest.mark.waits
@pytest.mark.parametrize("n", range(8))
def test_waiting(n: int) -> None:
    ran(f"waiting-{n}")

@pytest.mark.parametrize("n", range(12))
def test_busy(n: int) -> None:
    ran(f"busy-{n}")
"""


def test_waiting_tests_are_dealt_so_the_lanes_end_together_each_in_its_order() -> None:
    seconds = {"a": 9.0, "b": 5.0, "c": 4.0}
    dealt = split_lanes(["a", "b", "c", "d", "e"], seconds, 2)
    # a (9) alone; b (5) and c (4) beside it; then d and e (2 each, unlisted) in turn to
    # whichever lane ends sooner.
    assert dealt == [["a", "d"], ["b", "c", "e"]]
    assert split_lanes([], seconds, 2) == [[], []]


@pytest.mark.subprocess
def test_under_xdist_the_waiting_tests_run_on_two_workers_and_every_selected_test_runs_once(
    tmp_path: Path,
) -> None:
    (tmp_path / "conftest.py").write_text(
        f"import sys\nsys.path.insert(0, {str(REPO)!r})\n"
        "from tests.conftest import (pytest_collection_modifyitems, pytest_configure,\n"
        "    pytest_unconfigure, pytest_xdist_make_scheduler)\n",
        encoding="utf-8",
    )
    (tmp_path / "test_mixed.py").write_text(TESTS, encoding="utf-8")

    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-n", "4", "-p", "no:cacheprovider",
         "-W", "ignore::pytest.PytestUnknownMarkWarning", "test_mixed.py"],
        cwd=tmp_path, capture_output=True, text=True, timeout=120,
    )  # fmt: skip

    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "20 passed" in done.stdout
    ran = dict(line.split() for line in (tmp_path / "ran.txt").read_text().splitlines())
    assert len(ran) == 20
    lanes = {worker for name, worker in ran.items() if name.startswith("waiting")}
    assert len(lanes) == 2
    assert len(set(ran.values())) == 4  # the other two took the rest

    # Deselected, they are not waited for: the run takes what was selected.
    (tmp_path / "ran.txt").unlink()
    selected = subprocess.run(
        [sys.executable, "-m", "pytest", "-n", "4", "-p", "no:cacheprovider",
         "-W", "ignore::pytest.PytestUnknownMarkWarning", "-m", "not waits", "test_mixed.py"],
        cwd=tmp_path, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert selected.returncode == 0, selected.stdout[-3000:] + selected.stderr[-3000:]
    assert "12 passed" in selected.stdout
    assert len((tmp_path / "ran.txt").read_text().splitlines()) == 12
