"""deploy/install.sh, the container image's install steps, run here as the Dockerfile runs
it: the wheel built from this checkout with its `nats` extra into a new virtualenv, offline
(pip is given no index). The new venv sees this one's installed dependencies through a
``.pth`` line (as tests/packaging's does), so pip finds each requirement already met, the
`nats` extra's included, and installs the wheel alone; ``harness`` then comes from it."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from harness.version import __version__
from tests.deploy.outside import REPO

pytestmark = pytest.mark.subprocess

SCRIPT = REPO / "deploy" / "install.sh"
_NOT_SOURCE = (".venv", ".git", ".agents", "build", "dist", "*.egg-info", "*_cache", "__pycache__")


def offline_env(home: Path) -> dict[str, str]:
    """No index, no links, no pip config of the machine's: nothing can be downloaded."""
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("PIP_", "VIRTUAL_ENV", "ANTHROPIC_", "SLACK_", "HARNESS_"))
    }
    return {
        **env,
        "HOME": str(home),
        "PIP_NO_INDEX": "1",
        "PIP_CONFIG_FILE": os.devnull,
        "PYTHON": sys.executable,
    }


def run(*args: str, env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        args, env=env, cwd=cwd, capture_output=True, text=True, timeout=300, check=False
    )


def build_wheel(root: Path) -> Path:
    source = root / "checkout"
    shutil.copytree(REPO, source, ignore=shutil.ignore_patterns(*_NOT_SOURCE))
    built = run(
        *(sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation"),
        *("-w", str(root / "wheels"), "."),
        env=offline_env(root),
        cwd=source,
    )
    assert built.returncode == 0, built.stderr
    [wheel] = (root / "wheels").glob("*.whl")
    return wheel


def test_the_install_script_puts_harness_with_nats_bubblewrap_and_the_cli_into_a_venv(
    tmp_path: Path,
) -> None:
    wheel = build_wheel(tmp_path)
    venv = tmp_path / "opt-harness"
    made = run(sys.executable, "-m", "venv", str(venv), env=offline_env(tmp_path), cwd=tmp_path)
    assert made.returncode == 0, made.stderr
    [site] = venv.glob("lib/python*/site-packages")
    (site / "dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n", "utf-8")

    done = run("sh", str(SCRIPT), str(venv), str(wheel), env=offline_env(tmp_path), cwd=tmp_path)

    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert f"harness {__version__} (harness-slack-agents)" in lines
    assert [line for line in lines if line.startswith("bubblewrap: /")]
    assert [line for line in lines if line.startswith("claude: /")]
    where = run(
        str(venv / "bin" / "python"), "-c", "import harness; print(harness.__file__)",
        env=offline_env(tmp_path), cwd=tmp_path,
    )  # fmt: skip
    assert Path(where.stdout.strip()).is_relative_to(site), where.stdout + where.stderr
    worker = run(str(venv / "bin" / "harness"), "worker", "--help", env=offline_env(tmp_path),
                 cwd=tmp_path)  # fmt: skip
    assert worker.returncode == 0 and "--nats URL" in worker.stdout, worker.stderr


def test_the_install_script_refuses_a_source_that_is_not_there(tmp_path: Path) -> None:
    done = run(
        "sh", str(SCRIPT), str(tmp_path / "venv"), str(tmp_path / "missing.whl"),
        env=offline_env(tmp_path), cwd=tmp_path,
    )  # fmt: skip

    assert done.returncode == 2
    assert done.stderr.strip() == (
        f"install.sh: {tmp_path / 'missing.whl'} does not exist; "
        "usage: deploy/install.sh VENV SOURCE (a checkout's folder or a wheel)"
    )
    assert not (tmp_path / "venv").exists()
