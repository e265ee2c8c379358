"""``python -m harness.cli.demo`` (``make demo-cli``) as people run it: a subprocess on the shipped
project, with the keys a developer may well have exported."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from harness.cli.demo import main
from harness.cli.offline import KEY_VARIABLES, PROVIDER_SWITCHES
from harness.testing import spawn


@pytest.mark.slow
def test_the_cli_demo_stays_offline_with_a_key_exported_and_ends_with_commands_that_work(
    project_dir: Path, tmp_path: Path
) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLACK_")}
    env.update(ANTHROPIC_API_KEY="sk-ant-real-key", SLACK_BOT_TOKEN="xoxb-real-token")
    done = spawn.run(
        [sys.executable, "-m", "harness.cli.demo", "--config", str(project_dir / "config.yaml")],
        capture_output=True,
        text=True,
        timeout=180,
        env=env,
        cwd=tmp_path,
        check=False,
    )

    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout
    assert (
        "ANTHROPIC_API_KEY, SLACK_BOT_TOKEN set but not used: the demo is offline "
        "(make demo-cli REAL=1 uses them)"
    ) in out
    assert "agents talk to the scripted model" in out
    assert "(simulated)" in out  # each cost it prints came from the scripted model
    # The show command it prints, run exactly as printed from where the demo ran.
    [show] = [line.split("#")[0] for line in out.splitlines() if " show " in line]
    shown = subprocess.run(
        shlex.split(show), capture_output=True, text=True, timeout=60, env=env, cwd=tmp_path,
        check=False,
    )  # fmt: skip
    assert shown.returncode == 0, shown.stderr
    assert "product-analyst" in shown.stdout and "completed" in shown.stdout
    assert "Traceback" not in done.stderr
    lines = out.splitlines()
    commands = [line.split("#")[0].strip() for line in lines[lines.index("Try next:") + 1 :]]
    assert len(commands) == 3 and len(set(commands)) == 3, out
    [kept] = [line for line in out.splitlines() if line.startswith("The task is kept in ")]
    assert (Path(kept.removeprefix("The task is kept in ")) / "task.json").is_file()


def test_the_real_cli_demo_without_any_model_access_stops_before_starting_an_agent(
    project_dir: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    for name in (*KEY_VARIABLES, *PROVIDER_SWITCHES, "CLAUDE_CONFIG_DIR"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))  # no Claude Code login there

    code = main(["--real", "--config", str(project_dir / "config.yaml")])

    err = capsys.readouterr().err
    assert code == 2
    assert "--real, but nothing gives the agents a model" in err
    assert "fix: export ANTHROPIC_API_KEY=sk-ant-" in err and "make demo-cli" in err
    assert not (project_dir / ".agents" / "tasks").exists()
