"""The wheel as a newcomer installs it: built from this checkout, installed into a fresh venv,
run from a folder outside the repository. The checkout's editable install must play no part.

The new venv gets its dependencies from this one's site-packages through a ``.pth`` line: a
path added that way is not scanned for ``.pth`` files, so the editable install's finder (a
``.pth`` there) never loads, and ``harness`` can only come from the wheel.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import sys
import sysconfig
from collections.abc import Iterator
from dataclasses import dataclass
from importlib.metadata import version
from pathlib import Path

import pytest
import yaml

from harness.version import DISTRIBUTION, __version__

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
# What a checkout holds that a build must not see (or write into).
_NOT_SOURCE = (".venv", ".git", ".agents", "build", "dist", "*.egg-info", "*_cache", "__pycache__")


@dataclass(frozen=True)
class Installed:
    bin: Path
    site_packages: Path
    home: Path  # outside the repository, with no Claude Code login in it

    def env(self) -> dict[str, str]:
        """This process's environment without any way to reach a model (no key, gateway or
        login) and without proxies, HOME in a temporary folder."""
        env = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("ANTHROPIC_", "CLAUDE_", "HARNESS_", "SLACK_", "VIRTUAL_ENV"))
            and k.lower() not in {"http_proxy", "https_proxy", "all_proxy"}
        }
        return {**env, "HOME": str(self.home), "PATH": f"{self.bin}:{env.get('PATH', '')}"}

    def run(self, cwd: Path, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(self.bin / args[0]), *args[1:]],
            cwd=cwd,
            env=self.env(),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )


def _tool(*args: str, cwd: Path | None = None) -> None:
    done = subprocess.run(args, cwd=cwd, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, f"{' '.join(args)}\n{done.stdout}\n{done.stderr}"


def _build_and_install(root: Path) -> Path:
    """The wheel built from a copy of the checkout and installed into a new venv under
    ``root``; the venv's site-packages."""
    assert int(version("setuptools").split(".")[0]) >= 77, "pip install -e '.[test]' first"
    source = root / "source"
    shutil.copytree(REPO, source, ignore=shutil.ignore_patterns(*_NOT_SOURCE))
    wheels = root / "wheels"
    # No build isolation: this venv's setuptools builds it, so no index is needed.
    _tool(sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation",
          "-w", str(wheels), str(source))  # fmt: skip
    [wheel] = wheels.glob("*.whl")
    assert wheel.name.startswith("harness_slack_agents-")

    venv = root / "venv"
    _tool(sys.executable, "-m", "venv", "--without-pip", str(venv))
    python = venv / "bin" / "python"
    _tool(sys.executable, "-m", "pip", "--python", str(python), "install", "--quiet",
          "--no-deps", "--no-index", str(wheel))  # fmt: skip
    site = Path(
        subprocess.run(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            capture_output=True, text=True, timeout=60, check=True,
        ).stdout.strip()
    )  # fmt: skip
    (site / "dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n", "utf-8")
    return site


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Installed]:
    # One build per run: pytest-xdist's workers (each with a folder of its own under the run's)
    # share it, the first to get here building it under a lock while the others wait.
    shared = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        shared = shared.parent
    root = shared / "wheel"
    with (shared / "wheel.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        built = root / "site-packages.txt"
        if not built.exists():
            shutil.rmtree(root, ignore_errors=True)
            root.mkdir()
            built.write_text(str(_build_and_install(root)), "utf-8")
        site = Path(built.read_text("utf-8"))
    # The home is this worker's own: the tests run the CLI with it.
    yield Installed(root / "venv" / "bin", site, tmp_path_factory.mktemp("home"))


def test_harness_and_bot_come_from_the_wheel_not_the_checkout(installed: Installed) -> None:
    shown = installed.run(
        installed.home,
        "python",
        "-c",
        "import harness, bot, harness.cli.scaffold as s; "
        "print(harness.__file__, bot.__file__, s.DEFAULTS / 'config.yaml', sep='\\n')",
    )

    assert shown.returncode == 0, shown.stderr
    for line in shown.stdout.splitlines():
        assert Path(line).is_relative_to(installed.site_packages), line
        assert not Path(line).is_relative_to(REPO), line
        assert Path(line).exists()


def test_the_doctor_finds_the_slack_manifest_s_scopes_in_the_wheel(installed: Installed) -> None:
    manifest = yaml.safe_load((REPO / "manifest.yml").read_text("utf-8"))
    shown = installed.run(
        installed.home,
        "python",
        "-c",
        "from harness.cli.doctor import manifest_scopes; print(*manifest_scopes(), sep='\\n')",
    )

    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.splitlines() == manifest["oauth_config"]["scopes"]["bot"]


def test_harness_manifest_prints_the_slack_app_manifest_outside_a_checkout(
    installed: Installed,
) -> None:
    shown = installed.run(installed.home, "harness", "manifest")

    assert shown.returncode == 0, shown.stderr
    assert shown.stdout == (REPO / "manifest.yml").read_text("utf-8")


def test_version_and_bare_harness_work_anywhere(installed: Installed) -> None:
    shown = installed.run(installed.home, "harness", "--version")
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.strip() == f"harness {__version__} ({DISTRIBUTION})"

    bare = installed.run(installed.home, "harness")
    assert bare.returncode == 0, bare.stderr
    assert bare.stdout.startswith("usage: harness")
    assert "init" in bare.stdout


def test_a_newcomers_first_commands_outside_the_repository(
    installed: Installed, tmp_path: Path
) -> None:
    made = installed.run(tmp_path, "harness", "init")
    assert made.returncode == 0, made.stderr
    assert (tmp_path / "config.yaml").is_file()
    assert (tmp_path / "roles" / "developer.md").is_file()

    empty = installed.run(tmp_path, "harness", "tasks")
    assert empty.returncode == 0, empty.stderr
    assert empty.stdout.startswith("No tasks yet.")

    keyless = installed.run(tmp_path, "harness", "run", "x")
    assert keyless.returncode != 0
    assert "ANTHROPIC_API_KEY" in keyless.stderr
    assert "--scripted" in keyless.stderr
    assert not (tmp_path / ".agents").exists()  # no task, not even a tasks folder
    assert installed.run(tmp_path, "harness", "tasks").stdout.startswith("No tasks yet.")

    scripted = installed.run(
        tmp_path, "harness", "run", "--scripted", "plan: a settings page", timeout=120
    )
    assert scripted.returncode == 0, scripted.stderr
    assert scripted.stdout.startswith("product-analyst completed")
    assert "Summary: " in scripted.stdout
    listed = installed.run(tmp_path, "harness", "tasks")
    assert listed.stdout.splitlines()[1].split()[:1] == ["plan-a-settings-page"]


@pytest.mark.parametrize("demo", ["harness.cli.demo", "bot.demo"])
def test_the_demos_run_from_the_wheel_on_the_shipped_defaults(
    installed: Installed, tmp_path: Path, demo: str
) -> None:
    # No config.yaml here: the demos fall back to the shipped defaults.
    ran = installed.run(tmp_path, "python", "-m", demo, timeout=180)

    assert ran.returncode == 0, f"{ran.stdout}\n{ran.stderr}"
    assert "using the shipped defaults" in ran.stderr
    assert list(tmp_path.iterdir()) == []  # nothing left where it ran


def test_the_page_of_the_emulated_slack_comes_with_the_wheel(installed: Installed) -> None:
    shown = installed.run(
        installed.home,
        "python",
        "-c",
        "from bot.emulator_page import asset; "
        "print(*(asset(n).splitlines()[0] for n in ('emulator.html', 'emulator.js')), sep='\\n')",
    )

    assert shown.returncode == 0, shown.stderr
    html, script = shown.stdout.splitlines()
    assert html == "<!doctype html>"
    assert script.startswith("// The page of `harness bot --emulator`")
