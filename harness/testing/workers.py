"""``harness worker`` processes for tests, demos and benchmarks, started on loopback."""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness.testing import spawn
from harness.waits import within

if TYPE_CHECKING:
    from harness.runtime.nats_hosting import NatsHosting
    from harness.runtime.spec import AgentRuntime
    from harness.runtime.worker import Worker


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
    worker = await spawn.create_subprocess_exec(
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
        line = await within(worker.stderr.readline(), timeout)
        if not line:
            log = "".join(said[-20:])
            raise RuntimeError(f"harness worker {name} exited before it was ready:\n{log}")
        said.append(line.decode(errors="replace"))
    return worker


async def start_workers(
    names: Sequence[str],
    url: str,
    env: Mapping[str, str],
    workspaces: Path,
    *,
    slots: int = 2,
) -> dict[str, asyncio.subprocess.Process]:
    """``start_worker`` for each name, side by side (each spends about a second importing and
    connecting); if one fails, those started are stopped and its error raised."""
    starting = [
        asyncio.ensure_future(start_worker(name, url, env, workspaces, slots=slots))
        for name in names
    ]
    await asyncio.wait(starting)
    started = {name: done.result() for name, done in zip(names, starting, strict=True)
               if done.exception() is None}  # fmt: skip
    for done in starting:
        if (problem := done.exception()) is not None:
            await stop_workers(started.values())
            raise problem
    return started


async def stop_workers(workers: Iterable[asyncio.subprocess.Process]) -> None:
    """Stops each worker still running: all told first, so that they stop side by side."""
    workers = list(workers)
    for worker in workers:
        if worker.returncode is None:
            worker.terminate()
    for worker in workers:
        await worker.wait()


@contextlib.asynccontextmanager
async def worker_in_process(
    url: str, runtime: AgentRuntime, workspaces: Path, *, timeout: float = 30.0, **options: Any
) -> AsyncIterator[tuple[Worker, NatsHosting]]:
    """A worker ``w1`` (2 slots unless ``options`` say) taking agents from the NATS server at
    ``url`` in this process once it is ready, and a hosting sending agents to it; both stopped
    on leaving (the worker's agents and spares with it)."""
    from harness.runtime.nats_hosting import NatsHosting
    from harness.runtime.nats_link import NatsSettings
    from harness.runtime.worker import Worker

    options = {"name": "w1", "slots": 2, **options}
    worker = Worker(NatsSettings(url), runtime, workspaces=workspaces, **options)
    stop, ready = asyncio.Event(), asyncio.Event()
    serving = asyncio.create_task(worker.serve(stop, ready.set))
    hosting: NatsHosting | None = None
    try:
        readying = asyncio.ensure_future(ready.wait())
        await asyncio.wait(
            {readying, serving}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED
        )
        readying.cancel()
        if serving.done():
            serving.result()  # what stopped it
            raise RuntimeError("the worker stopped before it was ready")
        if not ready.is_set():
            raise TimeoutError(f"the worker was not ready within {timeout:g} s")
        hosting = NatsHosting(NatsSettings(url), lost_after=5.0)
        yield worker, hosting
    finally:
        if hosting is not None:
            await hosting.close()
        stop.set()
        await within(serving, timeout)
