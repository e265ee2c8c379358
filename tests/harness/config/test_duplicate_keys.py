"""A key written twice in config.yaml or a role's front matter is refused, naming the key and
both lines (YAML alone would keep the last one silently), by the `harness` command itself."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.testing import spawn

pytestmark = pytest.mark.subprocess


def harness_tasks(config: Path) -> subprocess.CompletedProcess[str]:
    return spawn.run(
        [sys.executable, "-m", "harness", "tasks", "--config", str(config)],
        capture_output=True,
        text=True,
        timeout=60,
        env=dict(os.environ),
        check=False,
    )


def test_a_key_written_twice_in_config_yaml_is_refused_with_both_lines(
    project_dir: Path,
) -> None:
    config = project_dir / "config.yaml"
    lines = config.read_text(encoding="utf-8").splitlines()
    config.write_text(
        "\n".join([*lines, "modelApiRetries: 3", "context:", "  budgetChars: 100"]) + "\n",
        encoding="utf-8",
    )
    first = lines.index("modelApiRetries: 10") + 1
    second = len(lines) + 1

    done = harness_tasks(config)

    assert done.returncode != 0
    assert "Traceback" not in done.stderr
    assert (
        f"{config}:{second}:1: duplicate key `modelApiRetries` on lines {first} and {second}"
        in (done.stderr)
    ), done.stderr
    assert "fix: keep one `modelApiRetries:`" in done.stderr


def test_a_key_written_twice_in_a_role_s_front_matter_is_refused_with_the_file_s_lines(
    project_dir: Path,
) -> None:
    role = project_dir / "roles" / "reviewer.md"
    text = role.read_text(encoding="utf-8")
    assert text.startswith("---\n")
    first = text.splitlines().index("maxTurns: 30") + 1
    role.write_text(text.replace("\n---\n", "\nmaxTurns: 500\n---\n", 1), encoding="utf-8")
    second = role.read_text(encoding="utf-8").splitlines().index("maxTurns: 500") + 1

    done = harness_tasks(project_dir / "config.yaml")

    assert done.returncode != 0
    assert "Traceback" not in done.stderr
    assert f"duplicate key `maxTurns` on lines {first} and {second}" in done.stderr, done.stderr
    assert str(role) in done.stderr
