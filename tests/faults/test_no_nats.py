"""No NATS at all: ``harness worker`` waits for it, saying so; every other command that needs
NATS says so within seconds (naming the URL and the fix); all give way to SIGTERM at once."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import time
from pathlib import Path

import pytest

from harness.errors import HarnessError
from harness.project import load_project
from harness.runtime.nats_link import NatsLink, NatsSettings
from harness.testing import spawn
from harness.testing.nats_server import free_port
from tests.bot.conftest import BOT_TOKEN, SECRET

pytestmark = [pytest.mark.anyio, pytest.mark.slow, pytest.mark.nats, pytest.mark.waits]


WAIT = 30.0


# A command that cannot reach NATS says so within this (the connect bound is 5 s, plus
# Python's start).
PROMPT_FAILURE = 20.0
PROMPT_STOP = 3.0  # from SIGTERM to the process gone


async def test_connecting_to_no_nats_fails_in_seconds_naming_the_url_and_the_fix() -> None:
    url = f"nats://127.0.0.1:{free_port()}"
    started = time.monotonic()
    with pytest.raises(HarnessError) as caught:
        await NatsLink.connect(NatsSettings(url), name="test", timeout=1.0)

    assert time.monotonic() - started < 3.0
    assert f"cannot connect to NATS at {url}" in str(caught.value)
    assert "nats-server -js" in caught.value.fix and "runtime.url" in caught.value.fix


# -- the commands, as people run them -----------------------------------------------------


def nats_config(project_dir: Path, url: str) -> Path:
    config = project_dir / "config.yaml"
    with config.open("a", encoding="utf-8") as file:
        file.write(f"\nruntime: {{kind: nats, url: '{url}'}}\n")
    return config


def command_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLACK_")}
    env["ANTHROPIC_API_KEY"] = "sk-ant-test-unused"
    return {**env, **extra}


async def harness(*args: str, env: dict[str, str]) -> asyncio.subprocess.Process:
    return await spawn.create_subprocess_exec(
        *(sys.executable, "-m", "harness", *args),
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )


async def finished(process: asyncio.subprocess.Process, timeout: float) -> tuple[int, str]:
    _, err = await asyncio.wait_for(process.communicate(), timeout)
    assert process.returncode is not None
    return process.returncode, err.decode(errors="replace")


def tasks_made(project_dir: Path) -> list[str]:
    tasks = load_project(project_dir / "config.yaml").config.tasks_dir
    if not tasks.exists():
        return []
    return [p.name for p in tasks.iterdir() if not p.name.startswith(".")]


def closed_url() -> str:
    return f"nats://127.0.0.1:{free_port()}"


async def test_harness_run_with_no_nats_exits_non_zero_in_seconds_and_makes_no_task(
    project_dir: Path,
) -> None:
    url = closed_url()
    config = nats_config(project_dir, url)
    run = await harness("run", "--config", str(config), "fix the login", env=command_env())
    code, err = await finished(run, PROMPT_FAILURE)

    assert code != 0
    assert f"cannot connect to NATS at {url}" in err
    assert "nats-server -js" in err and "runtime.url" in err
    assert "Traceback" not in err
    assert tasks_made(project_dir) == []


async def test_sigterm_while_harness_run_connects_ends_it_at_once(project_dir: Path) -> None:
    config = nats_config(project_dir, closed_url())
    run = await harness("run", "--config", str(config), "fix the login", env=command_env())
    assert run.stderr is not None
    line = await asyncio.wait_for(run.stderr.readline(), PROMPT_FAILURE)
    assert b"connecting to NATS" in line
    run.send_signal(signal.SIGTERM)
    code, err = await finished(run, PROMPT_STOP)

    assert code == 130
    assert "Traceback" not in err
    assert tasks_made(project_dir) == []


async def test_harness_worker_with_no_nats_waits_saying_so_and_stops_at_sigterm(
    tmp_path: Path,
) -> None:
    url = closed_url()
    args = ("worker", "--nats", url, "--name", "w1", "--workspaces", str(tmp_path / "w"))
    worker = await harness(*args, env=command_env())
    assert worker.stderr is not None
    line = await asyncio.wait_for(worker.stderr.readline(), PROMPT_FAILURE)
    assert b"connecting to" in line
    line = await asyncio.wait_for(worker.stderr.readline(), PROMPT_FAILURE)
    assert f"waiting for NATS at {url} (cannot connect".encode() in line
    assert worker.returncode is None  # it waits, rather than exits
    worker.send_signal(signal.SIGTERM)
    # It stops at once (the interpreter's own exit may take a moment on a loaded machine).
    line = await asyncio.wait_for(worker.stderr.readline(), PROMPT_STOP)
    assert b"stopped" in line
    code, err = await finished(worker, WAIT)
    assert code == 0 and "Traceback" not in err


async def test_harness_bot_with_no_nats_fails_at_start_saying_why(project_dir: Path) -> None:
    url = closed_url()
    config = nats_config(project_dir, url)
    env = command_env(SLACK_BOT_TOKEN=BOT_TOKEN, SLACK_SIGNING_SECRET=SECRET)
    bot = await harness(
        *("bot", "--mode", "http", "--port", str(free_port()), "--config", str(config)), env=env
    )
    code, err = await finished(bot, PROMPT_FAILURE)

    assert code != 0
    assert f"cannot connect to NATS at {url}" in err
    assert "listening on" not in err and "Traceback" not in err


async def test_runtime_nats_without_nats_py_says_to_install_it_before_making_a_task(
    project_dir: Path, tmp_path: Path
) -> None:
    hidden = tmp_path / "no-nats" / "nats"
    hidden.mkdir(parents=True)
    (hidden / "__init__.py").write_text("raise ImportError('no module named nats')\n")
    config = nats_config(project_dir, closed_url())
    env = command_env(PYTHONPATH=str(hidden.parent))
    run = await harness("run", "--config", str(config), "fix the login", env=env)
    code, err = await finished(run, PROMPT_FAILURE)

    assert code != 0
    assert "pip install 'harness-slack-agents[nats]'" in err
    assert "Traceback" not in err
    assert tasks_made(project_dir) == []
