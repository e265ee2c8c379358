"""What the workspaces' tests share: git kept from the machine's settings, a project
and a repository made in temp folders, and the workspaces over them."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from harness.config.settings import WorkspaceSettings, parse_config
from harness.workspaces.manager import Workspaces

DAY = 24 * 3600


@pytest.fixture(autouse=True)
def hermetic_git(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """git reads no config of this machine's user or system; commits get a test identity."""
    config = tmp_path / "gitconfig"
    config.write_text(
        "[user]\n\tname = Test\n\temail = test@example.com\n"
        "[init]\n\tdefaultBranch = main\n[commit]\n\tgpgsign = false\n",
        encoding="utf-8",
    )
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(config))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")


def git(cwd: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", *args], cwd=cwd, check=True, capture_output=True, text=True, timeout=60
    )
    return done.stdout.strip()


def make_repo(folder: Path, files: dict[str, str]) -> Path:
    folder.mkdir(parents=True)
    git(folder, "init", "--quiet", "--initial-branch=main")
    for name, text in files.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(text, encoding="utf-8")
    git(folder, "add", "--all")
    git(folder, "commit", "--quiet", "-m", "initial")
    return folder


def age(path: Path, days: float) -> None:
    """Make the folder and everything in it look untouched for ``days``."""
    when = os.stat(path).st_mtime - days * DAY
    for folder, _, files in os.walk(path):
        for name in [*files, ""]:
            os.utime(os.path.join(folder, name), (when, when), follow_symlinks=False)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """The harness's own checkout: a git repository holding config.yaml."""
    return make_repo(
        tmp_path / "harness",
        {"config.yaml": "# harness\n", ".gitignore": ".agents/\n", "README.md": "harness\n"},
    )


@pytest.fixture
def web(tmp_path: Path) -> Path:
    return make_repo(
        tmp_path / "web",
        {"README.md": "web\n", "src/app.py": "print('hello')\n", "src/util.py": "X = 1\n"},
    )


def settings_for(project: Path, **repositories: dict[str, Any]) -> WorkspaceSettings:
    config = parse_config(
        {"workspaces": {"repositories": repositories}}, file=project / "config.yaml"
    )
    return config.workspaces


@pytest.fixture
def workspaces(project: Path, web: Path) -> Workspaces:
    return Workspaces(settings_for(project, web={"path": str(web)}))
