"""``harness bot`` as people run it, but on a clock a test sets (``FileClock``): the test
moves a real bot process across a routine's firing time by writing a file. Everything else is
the real process: the CLI, config.yaml, Slack (an emulator), the agents' runtime.

    python -m bot.testing.clocked_bot CLOCK_FILE [--hold-task-creation MARKER] -- ARGS...

ARGS are `harness`'s (``bot --mode http ...``). ``--hold-task-creation``: every task's
creation writes MARKER and then waits forever, so that a test can kill the process between a
routine's firing being claimed and its task being made.
"""

from __future__ import annotations

import asyncio
import functools
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import bot.server
from harness.agents.task_desk import TaskDesk
from harness.atomic import write_atomic
from harness.cli.main import main
from harness.testing.clock_file import FileClock


def hold_task_creation(marker: Path) -> None:
    async def held(self: TaskDesk, *args: Any, **kwargs: Any) -> Any:
        write_atomic(marker, b"held\n")
        await asyncio.Event().wait()

    TaskDesk.create_task = held  # type: ignore[method-assign]


def run(argv: Sequence[str]) -> int:
    clock_file, *rest = argv
    if rest[:1] == ["--hold-task-creation"]:
        hold_task_creation(Path(rest[1]))
        rest = rest[2:]
    if rest[:1] == ["--"]:
        rest = rest[1:]
    # `harness bot` imports serve when it runs: it gets this one, on the test's clock.
    clock = FileClock(Path(clock_file))
    bot.server.serve = functools.partial(bot.server.serve, clock=clock)
    return main(rest)


if __name__ == "__main__":
    raise SystemExit(run(sys.argv[1:]))
