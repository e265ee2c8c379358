"""A run writes nothing in the home folder (as the README says): the launcher that ties the
Claude Code CLI's life to the harness's is kept in the virtualenv the harness runs from, not
in ``~/.cache``. A real `harness run` against the scripted model, with a home of its own."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.testing import spawn
from harness.testing.scripted_model import ScriptedModel, Turn

pytestmark = pytest.mark.subprocess


@pytest.fixture
def model() -> Iterator[ScriptedModel]:
    with ScriptedModel.in_thread(lambda _request: Turn.finish("Planned", ["plan.md"])) as served:
        yield served


def test_a_run_leaves_the_home_folder_empty_and_its_launcher_in_the_virtualenv(
    project_dir: Path, tmp_path: Path, model: ScriptedModel
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    # Outside the OS sandbox: there the CLI is started through the launcher (in it, the
    # sandbox's bubblewrap ties the CLI's life to the harness's instead).
    config = project_dir / "config.yaml"
    text = config.read_text(encoding="utf-8").replace(
        "\nsandbox:\n", "\nsandbox:\n  enabled: false\n"
    )
    config.write_text(text, encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if k != "XDG_CACHE_HOME"}

    done = spawn.run(
        [sys.executable, "-m", "harness", "run", "plan: a settings page",
         "--config", str(project_dir / "config.yaml")],
        env={**env, **model.env(), "HOME": str(home)},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )  # fmt: skip

    assert done.returncode == 0, done.stderr
    assert "product-analyst completed" in done.stdout
    assert sorted(p.relative_to(home) for p in home.rglob("*")) == []
    assert list((Path(sys.prefix) / "var" / "harness").glob("claude-*"))
