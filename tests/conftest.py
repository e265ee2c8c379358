"""Fixtures shared by the suites: a copy of the shipped project and the real-CLI runtime."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from harness.cli.scaffold import init_project
from harness.project import Project, load_project
from harness.testing import spawn
from tests.hang_report import BEFORE_TIMEOUT, HangReporter
from tests.lanes import LaneScheduling, name_lanes_file, write_waiting

REPO = Path(__file__).resolve().parent.parent

# The conformance suites live in modules of their own (not test modules): explain their
# failed asserts as pytest does for test modules.
pytest.register_assert_rewrite(
    "tests.harness.tasks.task_store_suite",
    "tests.harness.tasks.task_files_suite",
    "tests.harness.tasks.run_liveness_suite",
    "tests.harness.tasks.ledger_suite",
    "tests.harness.runtime.suite",
)

# Made at the session's start (its standard error copied before any test captures it), when
# pytest-timeout has a timeout to come before.
HANG_REPORTER = pytest.StashKey[HangReporter]()
# Under -n: the file the first worker names the waiting tests in (tests/lanes.py).
WAITING = pytest.StashKey[Path]()

# Why a test is too slow for the fast tier (pyproject.toml describes each marker): a test with
# any of these is also marked `slow`, so `pytest -m "not slow"` is the fast tier.
SLOW_REASONS = ("nats", "subprocess", "waits", "git")


def pytest_configure(config: pytest.Config) -> None:
    # The harness processes tests start are forked from one that imported the harness once
    # (harness/testing/fork_server.py): a second of CPU saved on each, a few hundred times.
    spawn.use_fork_server()
    # Under pytest-xdist (-n) the slow tests come first (below): its load scheduling must then
    # hand out tests one at a time, as workers get free, not in chunks fixed at the start
    # (one worker would be left with a chunk of the slowest tests while the others idle).
    if getattr(config.option, "numprocesses", None) and (
        getattr(config.option, "maxschedchunk", 0) is None
    ):
        config.option.maxschedchunk = 1
    if getattr(config.option, "numprocesses", None) and config.getvalue("dist") == "load":
        config.stash[WAITING] = name_lanes_file()
    timeout = float(config.getini("timeout") or 0)
    if timeout > BEFORE_TIMEOUT:
        stderr = os.dup(2)
        config.stash[HANG_REPORTER] = HangReporter(stderr, timeout - BEFORE_TIMEOUT)


@pytest.fixture(autouse=True)
def a_hang_says_where(request: pytest.FixtureRequest) -> Iterator[None]:
    """A test still running shortly before its timeout writes every thread's and asyncio
    task's stack to the session's standard error (``tests/hang_report.py``)."""
    reporter = request.config.stash.get(HANG_REPORTER, None)
    if reporter is None:
        yield
        return
    timer = reporter.watch(request.node.nodeid)
    try:
        yield
    finally:
        timer.cancel()


@pytest.hookimpl(tryfirst=True)  # before -m deselects by marker
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if item.get_closest_marker("slow") is None and any(
            item.get_closest_marker(reason) for reason in SLOW_REASONS
        ):
            item.add_marker(pytest.mark.slow)
    # On pytest-xdist's workers (`make test` runs `-n 5`): the slow tests first, the longest of
    # them first of all, so that the run ends on short tests spread over every worker rather
    # than on one long test started late. A stable sort: the rest keep their file order. A
    # serial run keeps the file order.
    if os.environ.get("PYTEST_XDIST_WORKER"):
        longest = _longest_tests()
        items.sort(
            key=lambda item: (
                item.get_closest_marker("slow") is None,
                -longest.get(item.nodeid, 0.0),
            )
        )
        # Those marked `waits` go to lanes of their own (tests/lanes.py).
        write_waiting(items)


def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> LaneScheduling | None:
    waiting = config.stash.get(WAITING, None)
    return None if waiting is None else LaneScheduling(config, log, waiting, _longest_tests())


def pytest_unconfigure(config: pytest.Config) -> None:
    waiting = config.stash.get(WAITING, None)
    if waiting is not None:  # a run that ended before the scheduler read it
        waiting.unlink(missing_ok=True)


def _longest_tests() -> dict[str, float]:
    """tests/longest.txt: the seconds each of the suite's longest tests held its worker in a
    measured run, by test id. A test renamed or new is simply not in it (it runs after them)."""
    table: dict[str, float] = {}
    for line in (REPO / "tests" / "longest.txt").read_text(encoding="utf-8").splitlines():
        if line.strip() and not line.startswith("#"):
            seconds, nodeid = line.split(maxsplit=1)
            table[nodeid] = float(seconds)
    return table


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(autouse=True)
def no_proxies(monkeypatch: pytest.MonkeyPatch) -> None:
    # slack_sdk and aiohttp honour HTTP(S)_PROXY but not NO_PROXY: loopback must go direct.
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy", "ALL_PROXY"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture(scope="session")
def user_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("xdg-cache")


@pytest.fixture(autouse=True)
def no_user_cache(monkeypatch: pytest.MonkeyPatch, user_cache: Path) -> None:
    # What commands remember for the next run (harness/cli/listing_cache.py) stays out of
    # the user's ~/.cache.
    monkeypatch.setenv("XDG_CACHE_HOME", str(user_cache))


@pytest.fixture
def project_dir(tmp_path: Path) -> Iterator[Path]:
    """The shipped config.yaml and roles/, written as `harness init` does, so that tasks land
    in tmp_path."""
    folder = tmp_path / "project"
    init_project(folder)
    # No spare agents (each a CLI started ahead) but in the tests about them.
    config = folder / "config.yaml"
    config.write_text(
        config.read_text(encoding="utf-8") + "\nspares: {}\nfollowUpSpares: 0\n", encoding="utf-8"
    )
    yield folder


@pytest.fixture
def project(project_dir: Path) -> Project:
    return load_project(project_dir / "config.yaml")
