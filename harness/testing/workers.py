"""``harness worker`` processes for tests, demos and benchmarks, started on loopback."""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import Mapping
from pathlib import Path


def worker_env(extra: Mapping[str, str]) -> dict[str, str]:
    """This process's environment without Slack secrets or an API key, plus ``extra`` (e.g.
    the scripted model's variables): what a worker machine would have."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLACK_")}
    env.pop("ANTHROPIC_API_KEY", None)
    return {**env, **extra}


async def start_worker(
    name: str,
    url: str,
    env: Mapping[str, str],
    workspaces: Path,
    *,
    slots: int = 2,
    timeout: float = 30.0,
) -> asyncio.subprocess.Process:
    """A ``harness worker`` taking agents from the NATS server at ``url``, once it says it is
    ready. Its log stays on its standard error (a pipe): read it, or it may fill."""
    worker = await asyncio.create_subprocess_exec(
        *(sys.executable, "-m", "harness", "worker", "--nats", url, "--name", name),
        *("--slots", str(slots), "--workspaces", str(workspaces / name)),
        env=dict(env),
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
    )
    assert worker.stderr is not None
    said: list[str] = []
    line = b""
    while b"ready" not in line:
        line = await asyncio.wait_for(worker.stderr.readline(), timeout)
        if not line:
            log = "".join(said[-20:])
            raise RuntimeError(f"harness worker {name} exited before it was ready:\n{log}")
        said.append(line.decode(errors="replace"))
    return worker
