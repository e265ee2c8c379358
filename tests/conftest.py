"""Fixtures shared by the suites: a copy of the shipped project and the real-CLI runtime."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.cli.scaffold import init_project
from harness.project import Project, load_project

REPO = Path(__file__).resolve().parent.parent

# The conformance suites live in modules of their own (not test modules): explain their
# failed asserts as pytest does for test modules.
pytest.register_assert_rewrite("tests.harness.tasks.suites", "tests.harness.runtime.suite")


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(autouse=True)
def no_proxies(monkeypatch: pytest.MonkeyPatch) -> None:
    # slack_sdk and aiohttp honour HTTP(S)_PROXY but not NO_PROXY: loopback must go direct.
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy", "ALL_PROXY"):
        monkeypatch.delenv(name, raising=False)


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
