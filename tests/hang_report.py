"""A test still running near pytest-timeout's limit says where it is stuck: every thread's
stack and every asyncio task's, with the test's id, written to the standard error the session
started with.

pytest-timeout prints its own dump to the terminal it is given; on a pytest-xdist worker that
is the channel to the controller, which is lost when the timeout then ends the worker, so a
hang under `make test` showed only "worker crashed while running ...". This dump comes a
little before the timeout, and the worker's standard error is the controller's.
"""

from __future__ import annotations

import asyncio
import faulthandler
import gc
import os
import threading
from typing import TextIO

# pytest-timeout ends a test (and under -n its worker) after `timeout` in pyproject.toml.
BEFORE_TIMEOUT = 15.0  # seconds


class HangReporter:
    """Writes the stacks of a test still running after ``after`` seconds to ``fd`` (a copy of
    the session's standard error, taken before any test captured it)."""

    def __init__(self, fd: int, after: float) -> None:
        self._fd = fd
        self._after = after

    def watch(self, nodeid: str) -> threading.Timer:
        """A timer that reports ``nodeid``'s stacks unless cancelled first (at its end)."""
        timer = threading.Timer(self._after, self.report, (nodeid,))
        timer.daemon = True
        timer.name = "hang report"
        timer.start()
        return timer

    def report(self, nodeid: str) -> None:
        with os.fdopen(os.dup(self._fd), "w", encoding="utf-8", errors="replace") as out:
            out.write(f"\n+++ {nodeid} still running after {self._after:.0f} s +++\n")
            out.flush()
            faulthandler.dump_traceback(file=out, all_threads=True)
            write_task_stacks(out)
            out.write(f"+++ end of {nodeid}'s stacks +++\n")


def write_task_stacks(out: TextIO) -> None:
    """The stack of every task of every running event loop in this process (read from another
    thread: a diagnostic that may miss a task created meanwhile, never a test's assertion)."""
    loops = [o for o in gc.get_objects() if isinstance(o, asyncio.AbstractEventLoop)]
    for loop in loops:
        if not loop.is_running():
            continue
        for task in sorted(asyncio.all_tasks(loop), key=lambda t: t.get_name()):
            out.write(f"--- asyncio task {task.get_name()}\n")
            task.print_stack(file=out)
    out.flush()
