"""``make demo``: what it says to try next (pure), and ``--real`` checking the Slack tokens it
would use before any call to Slack."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from bot.demo import _next_steps, main
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
