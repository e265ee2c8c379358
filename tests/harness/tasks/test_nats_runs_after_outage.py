"""Runs in the NATS task store across a restart of nats-server: the server comes back with
every run's heartbeat expired, so a process whose connection just came back takes no other
run for dead until that run had the time to beat again; a run that does not beat by then
(its process gone) is taken for dead as before."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from pathlib import Path

import pytest

from harness.tasks.nats_buckets import Buckets
from harness.tasks.nats_records import live_key
from harness.tasks.nats_store import NatsTaskStore
from harness.testing.nats_server import NatsServer
from tests.harness.tasks.nats_fixtures import settings_for
from tests.harness.tasks.test_nats_store import HOLDER

pytestmark = [pytest.mark.anyio, pytest.mark.nats, pytest.mark.subprocess, pytest.mark.waits]

BOUND = 20.0  # seconds any wait here may take on a loaded machine


async def until(check: object) -> None:
    async with asyncio.timeout(BOUND):
        while not await check():  # type: ignore[operator]
            await asyncio.sleep(0.05)


async def test_a_run_whose_heartbeat_expired_while_nats_was_away_is_not_taken_for_dead(
    tmp_path: Path,
) -> None:
    async with NatsServer(tmp_path / "nats") as nats:
        settings = settings_for(nats.url)
        holder = await asyncio.create_subprocess_exec(
            sys.executable, "-c", HOLDER, nats.url, settings.prefix,
            stdout=asyncio.subprocess.PIPE, env={**os.environ},
        )  # fmt: skip
        store = NatsTaskStore(settings, heartbeat_seconds=0.5)
        try:
            assert holder.stdout is not None
            run_id = (await asyncio.wait_for(holder.stdout.readline(), BOUND)).decode().strip()
            await store.begin_run()
            assert await store.run_alive(run_id)
            buckets = await store.buckets()

            # The holder is slow to come back (stopped); the server is killed and started
            # again, and its heartbeat runs out meanwhile.
            holder.send_signal(signal.SIGSTOP)
            await nats.kill()
            await nats.start()

            async def reconnected() -> bool:
                return bool(buckets.nc.stats["reconnects"]) and buckets.nc.is_connected

            async def expired() -> bool:
                return not await beating(buckets, run_id)

            await until(reconnected)
            await until(expired)
            assert await store.run_alive(run_id)  # it may beat any moment now
            assert await store.ended_runs() == []

            holder.send_signal(signal.SIGCONT)  # it reconnects and beats: alive, as it is
            await until(lambda: beating(buckets, run_id))
            assert await store.run_alive(run_id)

            holder.send_signal(signal.SIGKILL)  # gone for good: dead once it stops beating
            await holder.wait()

            async def dead() -> bool:
                return not await store.run_alive(run_id)

            await until(dead)
            assert await store.ended_runs() == [run_id]
        finally:
            if holder.returncode is None:
                holder.kill()
                await holder.wait()
            await store.close()


async def beating(buckets: Buckets, run_id: str) -> bool:
    """Whether the run's heartbeat is stored now."""
    from nats.js.errors import NotFoundError

    try:
        await buckets.runs.get(live_key(run_id))
    except NotFoundError:
        return False
    return True
