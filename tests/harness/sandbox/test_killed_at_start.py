"""A sandbox killed as it starts leaves nothing running: its outer bubblewrap SIGKILLed the
moment it has cloned the inner one (before the inner one's own parent-death signal is armed,
often), again and again; once the run's sandbox has closed, no bubblewrap and no program of
it is left. Real bubblewrap, the real launcher; a stand-in for the CLI that would run for
minutes."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from pathlib import Path

import pytest

from harness.sandbox.leftovers import is_dying, is_sandbox_of
from harness.sandbox.model_calls import ModelPolicy
from harness.sandbox.runner import open_sandbox

pytestmark = [pytest.mark.anyio, pytest.mark.slow, pytest.mark.subprocess]

ROUNDS = 25
WAIT = 10.0


def mentioning(text: str) -> list[int]:
    """The processes whose command line mentions ``text``."""
    found = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            with contextlib.suppress(OSError):
                if text.encode() in Path(f"/proc/{name}/cmdline").read_bytes():
                    found.append(int(name))
    return found


def children(pid: int) -> str:
    with contextlib.suppress(OSError):
        return Path(f"/proc/{pid}/task/{pid}/children").read_text().strip()
    return ""


async def gone(text: str) -> list[int]:
    """Waits (bounded) until no process mentions ``text``; those still there then."""
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(WAIT):
            while await asyncio.to_thread(mentioning, text):
                await asyncio.sleep(0.02)
    return await asyncio.to_thread(mentioning, text)


async def test_a_sandbox_killed_as_it_starts_leaves_no_bubblewrap_and_no_program_running(
    tmp_path: Path,
) -> None:
    cli = tmp_path / "tools" / "stand-in-cli"
    cli.parent.mkdir()
    cli.write_text("#!/bin/sh\nexec sleep 600\n", encoding="utf-8")
    cli.chmod(0o755)
    work = tmp_path / "work"
    work.mkdir()
    left: list[int] = []
    try:
        for round_ in range(ROUNDS):
            async with open_sandbox(
                cwd=str(work),
                binds=(),
                cli=str(cli),
                model_env={},
                allow_hosts=(),
                pass_env=(),
                set_env={},
                models=ModelPolicy({}),
            ) as sandbox:
                outer = await asyncio.create_subprocess_exec(
                    sandbox.cli_path,
                    stdin=asyncio.subprocess.DEVNULL,
                    stdout=asyncio.subprocess.DEVNULL,
                    stderr=asyncio.subprocess.DEVNULL,
                )
                # Killed the moment it has cloned its inner one (or, on some rounds, at once).
                if round_ % 5:
                    async with asyncio.timeout(WAIT):
                        while not children(outer.pid) and outer.returncode is None:
                            await asyncio.sleep(0)
                outer.send_signal(signal.SIGKILL)
                await outer.wait()
            left = await gone(str(cli))
            assert not left, f"round {round_}: still running: {left}"
    finally:
        for pid in left:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)


def test_only_the_bubblewrap_of_that_sandbox_is_taken_for_it() -> None:
    bwrap, socket = "/opt/bwrap", "/tmp/harness-sandbox-x/egress.sock"
    ours = b"\0".join([b"/opt/bwrap", b"--bind", socket.encode(), b"/run/harness/egress.sock"])
    assert is_sandbox_of(ours + b"\0", bwrap, socket)
    assert not is_sandbox_of(ours.replace(b"/opt/bwrap", b"/usr/bin/sleep", 1), bwrap, socket)
    other = ours.replace(b"harness-sandbox-x", b"harness-sandbox-y")
    assert not is_sandbox_of(other, bwrap, socket)
    # An agent's process that names the socket in an argument is no bubblewrap.
    assert not is_sandbox_of(b"sh\0-c\0" + socket.encode(), bwrap, socket)


def test_a_bubblewrap_already_ending_is_no_leftover() -> None:
    # The inner bubblewrap as its outer one exits: its parent-death SIGKILL pending.
    running = (
        "Name:\tbwrap\nState:\tS (sleeping)\nSigPnd:\t0000000000000000\nShdPnd:\t0000000000000000\n"
    )
    assert not is_dying(running)
    assert is_dying(running.replace("ShdPnd:\t0000000000000000", "ShdPnd:\t0000000000000100"))
    assert is_dying(running.replace("SigPnd:\t0000000000000000", "SigPnd:\t0000000000000100"))
    assert is_dying(running.replace("S (sleeping)", "Z (zombie)"))
    # Another signal pending (a SIGTERM) does not end it: still a leftover.
    assert not is_dying(running.replace("ShdPnd:\t0000000000000000", "ShdPnd:\t0000000000004000"))
