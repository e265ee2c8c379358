"""`harness tasks | head`, `harness show … | head`: a reader that goes before the output is
written ends the command quietly (exit 141, as a shell says of `yes | head`), never with a
BrokenPipeError traceback. The real command, its stdout a pipe whose reader is closed before
it starts (so every write fails)."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.cli.main import EXIT_PIPE_CLOSED
from harness.tasks.store import FileTaskStore
from harness.testing import spawn
from harness.testing.records import make_record

pytestmark = pytest.mark.subprocess


def stored_task(project_dir: Path) -> str:
    async def create() -> str:
        store = FileTaskStore(project_dir / ".agents" / "tasks")
        try:
            slug = (await store.create("an earlier request")).slug
            await store.save_dispatch(slug, make_record("a1", status="completed"))
            return slug
        finally:
            await store.close()

    return asyncio.run(create())


def into_closed_pipe(*args: str) -> subprocess.CompletedProcess[str]:
    read, write = os.pipe()
    os.close(read)  # the reader is gone before anything is written
    try:
        return spawn.run(
            [sys.executable, "-m", "harness", *args],
            stdout=write,
            stderr=subprocess.PIPE,
            text=True,
            timeout=60,
            check=False,
        )
    finally:
        os.close(write)


@pytest.mark.parametrize("command", ["tasks", "show"])
def test_a_reader_gone_before_the_output_ends_the_command_without_a_traceback(
    project_dir: Path, command: str
) -> None:
    config = ("--config", str(project_dir / "config.yaml"))
    args = {
        "tasks": ("tasks", *config),
        "show": ("show", stored_task(project_dir), *config),
    }[command]

    done = into_closed_pipe(*args)

    assert done.stderr == ""
    assert done.returncode == EXIT_PIPE_CLOSED
