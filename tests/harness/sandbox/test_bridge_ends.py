"""The sandbox bridge's forwarding child ends with the program it started: inside a sandbox,
bubblewrap's pid 1 waits for every child, so a forwarder left in accept() would keep the
sandbox alive after the CLI ended, whenever bubblewrap's parent-death signal was armed too
late (its parent killed as it started). Real bridge, real processes; the program a stand-in."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from harness.sandbox import bridge

pytestmark = [pytest.mark.slow, pytest.mark.subprocess]

WAIT = 10.0


def mentioning(text: str) -> list[int]:
    """The live processes whose command line mentions ``text``."""
    found = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            with contextlib.suppress(OSError):
                if text.encode() in Path(f"/proc/{name}/cmdline").read_bytes():
                    state = Path(f"/proc/{name}/stat").read_text().rsplit(")", 1)[-1].split()[0]
                    if state != "Z":
                        found.append(int(name))
    return found


def gone(text: str) -> list[int]:
    """Waits (bounded) until no live process mentions ``text``; those still there then."""
    deadline = time.monotonic() + WAIT
    while (left := mentioning(text)) and time.monotonic() < deadline:
        time.sleep(0.02)  # polling /proc: a process's end sends this test no event
    return left


@pytest.mark.parametrize("program", ["exit 0", "kill -9 $$"])
def test_the_forwarder_ends_when_the_program_it_started_ends(program: str) -> None:
    marker = f"/tmp/no-such-{uuid.uuid4().hex}.sock"  # names the bridge's processes
    done = subprocess.run(
        [sys.executable, "-I", "-S", str(Path(bridge.__file__)), marker, "/bin/sh", "-c",
         program],
        capture_output=True,
        timeout=30,
        check=False,
    )  # fmt: skip
    assert done.returncode in (0, -9), done.stderr

    left = gone(marker)
    for pid in left:  # the test's own leftovers go, whatever it found
        with contextlib.suppress(OSError):
            os.kill(pid, 9)
    assert left == [], "the bridge's forwarder outlived its program"
