"""Processes the tests start from the fork server (``harness/testing/spawn.py``) behave as the
interpreter started them: the same output, exit status, descriptors, folder and environment,
a signal ends them as it ends any process; what the fork server cannot give starts the usual
way."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from harness.testing import spawn

pytestmark = pytest.mark.subprocess

REPO = Path(__file__).resolve().parents[3]
# Prints what it was started with, then exits with the code its first argument names.
ECHO = "tests.harness.testing.echo_child"


def both(args: list[str], **kwargs: Any) -> tuple[subprocess.CompletedProcess[str], ...]:
    """``args`` run by the fork server, then by a new interpreter."""
    forked = spawn.run([sys.executable, *args], capture_output=True, text=True, **kwargs)
    started = subprocess.run([sys.executable, *args], capture_output=True, text=True, **kwargs)
    return forked, started


def test_a_command_says_and_exits_the_same_from_the_fork_server(tmp_path: Path) -> None:
    for args in (["-m", "harness", "--help"], ["-m", "harness", "no-such-command"]):
        forked, started = both(args, cwd=tmp_path)
        assert forked.returncode == started.returncode
        assert forked.stdout == started.stdout
        assert forked.stderr == started.stderr
    assert started.returncode == 2 and "no-such-command" in started.stderr


def test_the_child_has_its_folder_environment_arguments_and_standard_input() -> None:
    env = {**os.environ, "SPAWN_TEST": "é value"}
    forked, started = both(
        ["-m", ECHO, "3", "an argument"], cwd=REPO, env=env, input="from stdin\n"
    )
    assert forked.returncode == started.returncode == 3
    said, said_started = json.loads(forked.stdout), json.loads(started.stdout)
    assert said.pop("pid") not in (os.getpid(), said_started.pop("pid"))
    # Forked by the fork server, not started by this process as the other one was.
    assert said.pop("parent") != os.getpid() == said_started.pop("parent")
    assert said == said_started
    assert said["cwd"] == str(REPO)
    assert said["env"] == "é value"
    assert said["argv"] == ["an argument"]
    assert said["stdin"] == "from stdin\n"
    assert forked.stderr == started.stderr == "to stderr\n"


def test_an_uncaught_exception_is_a_traceback_and_exit_code_1() -> None:
    forked, started = both(["-m", ECHO, "raise"], cwd=REPO, input="")
    assert forked.returncode == started.returncode == 1
    assert forked.stderr.splitlines()[-1] == started.stderr.splitlines()[-1]
    assert "Traceback" in forked.stderr


def test_a_signal_ends_a_forked_process_with_that_signal() -> None:
    process = spawn.Popen(
        [sys.executable, "-m", ECHO, "wait"],
        cwd=REPO,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    assert process.stdout is not None
    assert process.stdout.readline() == "waiting\n"
    assert process.poll() is None
    process.send_signal(signal.SIGTERM)
    assert process.wait(timeout=10) == -signal.SIGTERM
    process.stdout.close()
    assert process.stdin is not None
    process.stdin.close()


@pytest.mark.anyio
async def test_an_asyncio_process_streams_its_output_and_is_killed() -> None:
    process = await spawn.create_subprocess_exec(
        *(sys.executable, "-X", "faulthandler", "-m", ECHO, "wait"),
        cwd=REPO,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert process.stdout is not None
    assert await asyncio.wait_for(process.stdout.readline(), 30) == b"waiting\n"
    assert process.returncode is None
    process.kill()
    assert await asyncio.wait_for(process.wait(), 10) == -signal.SIGKILL
    out, err = await process.communicate()
    assert (out, err) == (b"", b"to stderr\n")


def test_interpreter_options_start_a_new_interpreter(tmp_path: Path) -> None:
    done = spawn.run(
        [sys.executable, "-X", "importtime", "-m", "harness", "--help"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert done.returncode == 0
    assert "import time:" in done.stderr  # only a new interpreter reports its imports
