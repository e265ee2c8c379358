"""``/healthz``, ``/readyz`` and ``/metrics`` of a harness process (aiohttp), for the bot and
for workers.

``/healthz`` says "ok" while the process serves; ``/readyz`` runs its checks and answers 200,
or 503 with one line per failing check, then a line naming the leases the process holds (its
singletons), if any; ``/metrics`` is the process's registry in the Prometheus text format.
"""

from __future__ import annotations

import asyncio
import errno
import os
import tempfile
from collections.abc import Awaitable, Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from harness.metrics import CONTENT_TYPE, Metrics
from harness.waits import within

if TYPE_CHECKING:  # imported where served: a worker with no health port never loads aiohttp
    from aiohttp import web

# A check: None when fine, else why not (one line).
Check = Callable[[], Awaitable[str | None]]
# The names of the leases the process holds now.
Held = Callable[[], Sequence[str]]
WRITE_TIMEOUT = 2.0


def add_routes(
    app: web.Application, metrics: Metrics, checks: Mapping[str, Check], held: Held | None = None
) -> None:
    from aiohttp import web

    async def healthz(_request: web.Request) -> web.Response:
        return web.Response(text="ok")

    async def readyz(_request: web.Request) -> web.Response:
        names = list(checks)
        outcomes = await asyncio.gather(*(checks[name]() for name in names))
        failing = [f"{name}: {why}" for name, why in zip(names, outcomes, strict=True) if why]
        leases = list(held()) if held is not None else []
        note = f"leases held: {', '.join(leases)}\n" if leases else ""
        if failing:
            return web.Response(status=503, text="\n".join(failing) + "\n" + note)
        return web.Response(text="ready\n" + note)

    async def metrics_page(_request: web.Request) -> web.Response:
        body = metrics.exposition()
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE})

    app.router.add_get("/healthz", healthz)
    app.router.add_get("/readyz", readyz)
    app.router.add_get("/metrics", metrics_page)


async def serve(
    metrics: Metrics,
    checks: Mapping[str, Check],
    *,
    port: int,
    host: str = "0.0.0.0",
    more: Callable[[web.Application], None] | None = None,
    held: Held | None = None,
) -> web.AppRunner:
    """Serves the three endpoints on a port of their own (0: any free one; see
    ``bound_port``) until the runner is cleaned up; ``more`` adds routes of its own (the
    bot's webhooks in Socket Mode, which has no other port); ``held`` names the leases held."""
    from aiohttp import web

    app = web.Application()
    add_routes(app, metrics, checks, held)
    if more is not None:
        more(app)
    runner = web.AppRunner(app, access_log=None, shutdown_timeout=1.0)
    await runner.setup()
    try:
        await web.TCPSite(runner, host, port).start()
    except OSError:
        await runner.cleanup()
        raise
    return runner


def bound_port(runner: web.AppRunner) -> int:
    return int(runner.addresses[0][1])


def writable(folder: Path) -> Check:
    """A check that a file can be written in ``folder`` (a temp file, removed), off the event
    loop and bounded in time."""

    def attempt() -> None:
        folder.mkdir(parents=True, exist_ok=True)  # as the store would on its first write
        fd, name = tempfile.mkstemp(prefix=".readyz-", dir=folder)
        try:
            os.write(fd, b"ok")
            os.fsync(fd)
        finally:
            os.close(fd)
            os.unlink(name)

    async def check() -> str | None:
        try:
            await within(asyncio.to_thread(attempt), WRITE_TIMEOUT)
        except TimeoutError:
            return f"{folder} not writable within {WRITE_TIMEOUT:g} s"
        except OSError as exc:
            why = f"{folder} not writable: {exc.strerror or exc}"
            if exc.errno in (errno.ENOSPC, errno.EDQUOT):
                why += f" (the volume mounted at {volume_of(folder)} is full)"
            return why
        return None

    return check


def volume_of(path: Path) -> Path:
    """The mount point of the file system ``path`` is on (of its nearest existing parent)."""
    folder = path.absolute()
    while not folder.exists() and folder.parent != folder:
        folder = folder.parent
    while not os.path.ismount(folder) and folder.parent != folder:
        folder = folder.parent
    return folder


async def bounded(
    probe: Callable[[], Awaitable[object]], timeout: float = WRITE_TIMEOUT
) -> str | None:
    """Runs ``probe`` within ``timeout`` s: None when it ends in time (whatever it says), else
    why not: a server that does not answer fails the check rather than hang it."""
    try:
        await within(probe(), timeout)
    except TimeoutError:
        return f"no answer within {timeout:g} s"
    return None
