"""A cluster on loopback: a NATS server with JetStream and ``harness worker`` processes, as
the ``runtime:`` settings that send agents to them (``make demo-cluster``)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from pathlib import Path

from harness.config import RuntimeSettings
from harness.testing.nats_server import NatsServer
from harness.testing.workers import start_worker

SLOTS = 2


@contextlib.asynccontextmanager
async def local_cluster(
    folder: Path,
    workspaces: Path,
    env: Mapping[str, str],
    *,
    workers: Sequence[str] = ("worker-a", "worker-b"),
    say: Callable[[str], None] = lambda _line: None,
) -> AsyncIterator[RuntimeSettings]:
    """NATS keeping its data in ``folder``, and ``workers`` (each with ``env``, its workspaces
    under ``workspaces``/its name) ready to take agents; stopped on leaving. ``say`` is told
    each step, in words."""
    async with NatsServer(folder / "nats") as nats:
        say(f"NATS with JetStream at {nats.url}")
        started: list[asyncio.subprocess.Process] = []
        logs: list[asyncio.Future[None]] = []
        try:
            for name in workers:
                worker = await start_worker(name, nats.url, env, workspaces, slots=SLOTS)
                started.append(worker)
                # Its log is not shown; read so that it never blocks on a full pipe.
                logs.append(asyncio.ensure_future(_drained(worker)))
                say(f"{name} ready (harness worker, {SLOTS} slots, workspaces in "
                    f"{workspaces / name})")  # fmt: skip
            yield RuntimeSettings(kind="nats", url=nats.url)
        finally:
            for worker in started:
                if worker.returncode is None:
                    worker.terminate()
                await worker.wait()
            await asyncio.gather(*logs)
            if started:
                say("workers stopped")


async def _drained(worker: asyncio.subprocess.Process) -> None:
    assert worker.stderr is not None
    await worker.stderr.read()
