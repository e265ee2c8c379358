"""``make demo``: what it says to try next (pure), ``--real`` checking the Slack tokens it
would use before any call to Slack, and the demo as people run it (a process with the shipped
config.yaml, the Slack emulator and the scripted model): again and again in one folder, offline
with keys exported, then on a NATS server with two `harness worker`s."""

from __future__ import annotations

import os
import re
import shlex
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from bot.demo import DEFAULT_REQUEST, _next_steps, main
from harness.cli.offline import harness_command
from harness.testing import spawn
from tests.bot.conftest import clean_env


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


def _demo(command: list[str], folder: Path, env: dict[str, str] | None = None) -> str:
    if env is None:
        env = {k: v for k, v in os.environ.items() if not k.startswith("SLACK_")}
        env.pop("ANTHROPIC_API_KEY", None)
    done = spawn.run(
        command, capture_output=True, text=True, timeout=120, env=env, cwd=folder, check=False
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    return done.stdout


def _try_next(out: str) -> list[str]:
    """The commands under "Try next:", as printed."""
    lines = out.splitlines()
    return [line.split("#")[0].strip() for line in lines[lines.index("Try next:") + 1 :]]


def _tasks(folder: Path) -> set[str]:
    return {task.parent.name for task in (folder / ".agents" / "tasks").glob("*/task.json")}


def _offline_with_keys_exported(project_dir: Path) -> str:
    """The demo with the keys a developer may well have exported: it must use none of them.
    The model API they name is a loopback port that records any connection."""
    with socket.socket() as model_api:
        model_api.bind(("127.0.0.1", 0))
        model_api.listen()
        model_api.setblocking(False)
        exported = clean_env(
            ANTHROPIC_API_KEY="sk-ant-real-key",
            ANTHROPIC_BASE_URL=f"http://127.0.0.1:{model_api.getsockname()[1]}",
            SLACK_BOT_TOKEN="xoxb-real-token",
        )
        command = [sys.executable, "-m", "bot.demo", "--config", str(project_dir / "config.yaml")]
        # Run from elsewhere: the commands it prints then name the config.
        out = _demo([*command, "--timeout", "60"], project_dir.parent, exported)
        with pytest.raises(BlockingIOError):
            model_api.accept()  # no agent went there
    assert (
        "ANTHROPIC_API_KEY, ANTHROPIC_BASE_URL, SLACK_BOT_TOKEN set but not used: the demo is "
        "offline (make demo REAL=1 uses them)"
    ) in out
    assert "agents talk to the scripted model" in out
    assert "UDEMO: plan: a settings page" in out
    assert out.index("*product-analyst* (agent") < out.index("drafted *developer*")
    assert "[developer: Implement step 1" in out  # the analyst's plan: its drafted agent
    assert out.index("*developer* finished") < out.index("*product-analyst* finished")
    # What it points at is still there after it exited, and the commands it names work.
    transcript = project_dir / ".agents" / "demo-transcript.txt"
    assert transcript.read_text(encoding="utf-8").strip() == out.strip()
    [show] = [line.split("#")[0].split() for line in out.splitlines() if " show " in line]
    assert show[-2] == "show" and show[1:3] == ["--config", str(project_dir / "config.yaml")]
    shown = spawn.run(
        [sys.executable, "-m", "harness", *show[1:]], capture_output=True, text=True,
        timeout=60, env=exported, check=False,
    )  # fmt: skip
    assert shown.returncode == 0, shown.stderr
    assert "product-analyst" in shown.stdout and "completed" in shown.stdout
    return out


def _check_the_cluster_run(out: str, project_dir: Path, task: str) -> None:
    """The cluster demo uses both of its workers: the analyst on one, the developer it drafts
    on the other, each said in the transcript (live, or from its record once the run is over:
    a short agent can start and end between two events) and each leaving its workspace on its
    own worker, where the demo said; and it stops the workers."""
    assert "worker-a ready" in out and "worker-b ready" in out
    assert "product-analyst" in out and "runs on worker-" in out
    assert "*product-analyst* finished" in out
    assert "demo: workers stopped" in out
    placed = dict(re.findall(r"^demo: (product-analyst|developer) \w+ (?:runs|ran) on (worker-\w)$",
                             out, re.MULTILINE))  # fmt: skip
    assert set(placed) == {"product-analyst", "developer"}, out
    assert set(placed.values()) == {"worker-a", "worker-b"}, out
    workers = project_dir / ".agents" / "workspaces" / ".demo-workers"
    assert f"workspaces in {workers / 'worker-a'}" in out
    used = sorted(folder.parent.name for folder in workers.glob(f"worker-*/{task}"))
    assert used == ["worker-a", "worker-b"], list(workers.rglob("*"))


# One test for the demo's three runs (each starts a bot, and the cluster's a NATS server and two
# workers too): again and again in one folder, with keys exported, then on the cluster.
@pytest.mark.slow
@pytest.mark.subprocess
@pytest.mark.nats
def test_the_demo_runs_again_offline_and_then_on_the_cluster_in_one_folder_each_in_a_new_thread(
    project_dir: Path,
) -> None:
    outs = [_demo([sys.executable, "-m", "bot.demo", "--timeout", "60"], project_dir)]
    outs.append(_offline_with_keys_exported(project_dir))
    [cluster] = [c for c in _try_next(outs[-1]) if "--cluster" in c]
    before = _tasks(project_dir)
    outs.append(_demo([*shlex.split(cluster), "--timeout", "60"], project_dir, clean_env()))
    [made] = _tasks(project_dir) - before
    _check_the_cluster_run(outs[-1], project_dir, made)

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
