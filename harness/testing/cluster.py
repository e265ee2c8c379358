"""A cluster on loopback: a NATS server with JetStream and ``harness worker`` processes, as
the ``runtime:`` settings that send agents to them (``make demo-cluster``)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from pathlib import Path

from harness.config import RuntimeSettings
from harness.testing.nats_server import NatsServer
from harness.testing.workers import start_workers, stop_workers

SLOTS = 2


@contextlib.asynccontextmanager
async def local_cluster(
    folder: Path,
    workspaces: Path,
    env: Mapping[str, str],
    *,
    workers: Sequence[str] = ("worker-a", "worker-b"),
    slots: int = SLOTS,
    say: Callable[[str], None] = lambda _line: None,
) -> AsyncIterator[RuntimeSettings]:
    """NATS keeping its data in ``folder``, and ``workers`` (each with ``env``, its workspaces
    under ``workspaces``/its name) ready to take agents; stopped on leaving. ``say`` is told
    each step, in words."""
    async with NatsServer(folder / "nats") as nats:
        say(f"NATS with JetStream at {nats.url}")
        started = await start_workers(workers, nats.url, env, workspaces, slots=slots)
        # Their logs are not shown; read so that they never block on a full pipe.
        logs = [asyncio.ensure_future(_drained(worker)) for worker in started.values()]
        try:
            for name in workers:
                say(f"{name} ready (harness worker, {slots} slot(s), workspaces in "
                    f"{workspaces / name})")  # fmt: skip
            yield RuntimeSettings(kind="nats", url=nats.url)
        finally:
            await stop_workers(started.values())
            await asyncio.gather(*logs)
            say("workers stopped")


async def _drained(worker: asyncio.subprocess.Process) -> None:
    assert worker.stderr is not None
    await worker.stderr.read()
