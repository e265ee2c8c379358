"""``make demo``: what it says to try next (pure), ``--real`` checking the Slack tokens it
would use before any call to Slack, and the demos run again and again in one folder."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from bot.demo import DEFAULT_REQUEST, _next_steps, main
from harness.cli.offline import harness_command


def test_the_next_steps_show_the_demos_task_with_the_config_it_ran_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    config = tmp_path / "elsewhere" / "config.yaml"

    lines = _next_steps(config, "plan-a-page", simulated=True)

    assert lines[0] == "Try next:"
    assert lines[1].split("#")[0].split() == [
        *harness_command().split(), "--config", str(config), "show", "plan-a-page"
    ]  # fmt: skip
    assert "(simulated) cost" in lines[2]
    # Outside this checkout there is no Makefile: the cluster demo is named as a module.
    assert lines[3].split("#")[0].split() == [
        sys.executable, "-m", "bot.demo", "--cluster", "--config", str(config)
    ]  # fmt: skip


def test_the_next_steps_use_the_usual_config_without_naming_it_and_real_costs_unmarked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)

    lines = _next_steps(Path("config.yaml"), None, simulated=False)

    assert lines[1].split("#")[0].split() == [*harness_command().split(), "tasks"]
    assert not any("simulated" in line or "--config" in line for line in lines)
    commands = [line.split("#")[0].strip() for line in lines[1:]]
    assert len(set(commands)) == len(commands), lines  # no task to show: `tasks` only once


def test_the_real_demo_names_a_swapped_token_before_any_call_to_slack(
    project_dir: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("SLACK_BOT_TOKEN", "xapp-1-secretpart")
    monkeypatch.setenv("SLACK_API_URL", "http://127.0.0.1:9/api/")  # never reached

    code = main(["--real", "--config", str(project_dir / "config.yaml")])

    err = capsys.readouterr().err
    assert code == 2
    assert "SLACK_BOT_TOKEN holds a token shaped like SLACK_APP_TOKEN" in err
    assert "export SLACK_BOT_TOKEN=xoxb-" in err and "secretpart" not in err


def _demo(command: list[str], folder: Path) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLACK_")}
    env.pop("ANTHROPIC_API_KEY", None)
    done = subprocess.run(
        command, capture_output=True, text=True, timeout=120, env=env, cwd=folder, check=False
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    return done.stdout


def _try_next(out: str) -> list[str]:
    """The commands under "Try next:", as printed."""
    lines = out.splitlines()
    return [line.split("#")[0].strip() for line in lines[lines.index("Try next:") + 1 :]]


@pytest.mark.slow
def test_the_demo_runs_again_and_then_on_the_cluster_in_one_folder_each_in_a_new_thread(
    project_dir: Path,
) -> None:
    outs = [_demo([sys.executable, "-m", "bot.demo", "--timeout", "60"], project_dir)]
    outs.append(_demo([sys.executable, "-m", "bot.demo", "--timeout", "60"], project_dir))
    [cluster] = [c for c in _try_next(outs[-1]) if "--cluster" in c]
    outs.append(_demo([*shlex.split(cluster), "--timeout", "60"], project_dir))

    for out in outs:
        assert "demo: done, the analyst's result is in the thread" in out
        commands = _try_next(out)
        assert len(set(commands)) == len(commands), out
    # Each run asked in a thread of its own, and every task is kept and listed.
    asked = [line.split(" | ")[0] for out in outs for line in out.splitlines()
             if line.endswith("UDEMO: " + DEFAULT_REQUEST)]  # fmt: skip
    assert len(set(asked)) == 3, asked
    tasks = list((project_dir / ".agents" / "tasks").glob("*/task.json"))
    assert len(tasks) == 3
    [listing] = [c for c in _try_next(outs[-1]) if c.endswith(" tasks")]
    listed = subprocess.run(
        shlex.split(listing), capture_output=True, text=True, timeout=60, cwd=project_dir,
        check=False,
    )  # fmt: skip
    assert listed.returncode == 0, listed.stderr
    assert all(task.parent.name in listed.stdout for task in tasks), listed.stdout
