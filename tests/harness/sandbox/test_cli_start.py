"""What an agent's CLI does at its start and leaves behind, beyond its work: no transcript of
its session on disk (the task's journal keeps every message; a transcript in the agent's home
was never read again and cost every run the writing of it), and a sandbox bridge that starts
on the interpreter alone.

Real parts: the Claude Code CLI, in real bubblewrap or outside it, against the scripted model,
placed by the agent host in a real git worktree (the escape rig).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from harness.sandbox import bridge
from tests.harness.sandbox.conftest import Rig

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

# Every session file the CLI would keep in its home (``runtime/test_cli_state.py`` covers
# the folder a run outside the sandbox gets).
FIND_TRANSCRIPTS = 'find "$HOME/.claude" -name "*.jsonl"; echo "listed"'


async def test_an_agent_leaves_no_transcript_of_its_session_on_disk(rig: Rig) -> None:
    outcome, results = await rig.run("echo first step", FIND_TRANSCRIPTS)

    assert outcome.status == "completed", outcome.error
    assert results[1].strip() == "listed", results[1]  # no session file, mid-run


def test_the_sandbox_bridge_starts_on_the_interpreter_alone() -> None:
    """It runs before every agent's CLI: importing socket, threading or contextlib (enum,
    selectors, collections...) would cost each run about 10 ms of CPU for nothing."""
    done = subprocess.run(
        [sys.executable, "-I", "-S", "-X", "importtime", str(Path(bridge.__file__))],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )

    assert done.returncode == 2 and "usage: bridge.py" in done.stderr  # ran, without arguments
    imported = {line.split("|")[-1].strip() for line in done.stderr.splitlines() if "|" in line}
    assert not imported & {"socket", "threading", "contextlib", "enum", "selectors"}, imported
