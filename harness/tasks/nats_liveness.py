"""Runs in the NATS task store: ``run.<id>`` in the tasks bucket says a run began (until it is
forgotten); ``live.<id>`` in the runs bucket, put again every ``heartbeat`` seconds, says it
still lives. The runs bucket's values expire ``3 x heartbeat`` after their last put, so a
process that dies however it dies (SIGKILL, the machine lost) leaves its run alive at most
that long: 6 seconds with the default 2-second heartbeat.

A server that was away for longer than that comes back with every run's heartbeat expired,
each put again only as its process reconnects and beats. So for ``3 x heartbeat`` after this
process's connection came back, no other run is taken for dead: a replica taking over must
not follow the agents of one that is alive and about to beat."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from harness.clock import Clock
from harness.tasks.nats_buckets import Buckets, nats_failures
from harness.tasks.nats_kv import scan
from harness.tasks.nats_records import LIVE, RUN, live_key, run_key, taken_key
from harness.tasks.run_lock import RUN_ID_BYTES, is_agent_id, is_run_id
from harness.waits import stop_task

if TYPE_CHECKING:
    from nats.aio.client import Client

logger = logging.getLogger(__name__)

HEARTBEAT_SECONDS = 2.0
# A heartbeat missed this many times over and the run is taken for dead.
MISSED_BEATS = 3


class NatsRuns:
    """This store's run and what it knows of others'."""

    def __init__(
        self, connect: Callable[[], Awaitable[Buckets]], clock: Clock, heartbeat: float
    ) -> None:
        self._connect = connect
        self._clock = clock
        self.heartbeat = heartbeat
        self._run_id: str | None = None
        self._beating: asyncio.Task[None] | None = None
        self._beginning: asyncio.Future[str] | None = None
        # The connection's reconnections seen so far, and until when (the loop's time) runs
        # missing their heartbeat are not taken for dead after the latest one.
        self._reconnects: tuple[Client, int] | None = None
        self._settled_at = 0.0

    async def begin_run(self) -> str:
        if self._run_id is not None:
            return self._run_id
        if self._beginning is None or self._beginning.done():
            self._beginning = asyncio.ensure_future(self._begin())
        return await asyncio.shield(self._beginning)

    async def _begin(self) -> str:
        buckets = await self._connect()
        self._settling(buckets)  # the connection as it is now: no reconnection to wait out
        run_id = self._clock.token(RUN_ID_BYTES)
        await buckets.tasks.put(run_key(run_id), b"")
        await buckets.runs.put(live_key(run_id), b"")
        self._run_id = run_id
        self._beating = asyncio.create_task(self._beat(run_id), name=f"run-heartbeat-{run_id}")
        return run_id

    async def _beat(self, run_id: str) -> None:
        # The loop's timer, not the clock: the beat must keep real time for other processes.
        while True:
            await asyncio.sleep(self.heartbeat)
            try:
                buckets = await self._connect()
                await buckets.runs.put(live_key(run_id), b"")
            except nats_failures() as exc:  # the next beat tries again
                logger.warning("run %s: heartbeat not stored: %s", run_id, exc)

    async def run_alive(self, run_id: str) -> bool:
        if not is_run_id(run_id):
            return False
        if run_id == self._run_id:
            return True
        live = await self._live()
        return live is None or run_id in live

    async def _live(self) -> set[str] | None:
        """The runs whose heartbeat is stored; None while the server is just back."""
        buckets = await self._connect()
        live = {key.removeprefix(LIVE) for key in await _keys(buckets, runs=True)}
        return None if self._settling(buckets) else live

    def _settling(self, buckets: Buckets) -> bool:
        """Whether this connection came back less than ``3 x heartbeat`` ago."""
        seen = (buckets.nc, int(buckets.nc.stats.get("reconnects", 0)))
        now = asyncio.get_running_loop().time()
        before = self._reconnects
        # Only a reconnection counts: a new connection (the store opened again) waits none.
        if before is not None and before[0] is seen[0] and before[1] != seen[1]:
            self._settled_at = now + self.heartbeat * MISSED_BEATS
            wait = self._settled_at - now
            logger.info("NATS is back: no run is taken for dead for %.0f s", wait)
        self._reconnects = seen
        return now < self._settled_at

    async def ended_runs(self) -> list[str]:
        buckets = await self._connect()
        begun = [key.removeprefix(RUN) for key in await _keys(buckets, runs=False)]
        live = await self._live()
        if live is None:
            return []
        return [run for run in begun if run not in live and run != self._run_id]

    async def forget_run(self, run_id: str) -> None:
        if not is_run_id(run_id) or await self.run_alive(run_id):
            return
        buckets = await self._connect()
        await buckets.tasks.purge(run_key(run_id))

    async def take_up(self, run_id: str, agent_id: str) -> bool:
        if not is_run_id(run_id) or not is_agent_id(agent_id):
            return False
        mine = await self.begin_run()
        buckets = await self._connect()
        # In the runs bucket, whose values expire: the taker writes its own run into the
        # agent's record at once, so the claim need not outlive a few heartbeats (and one
        # a dead taker left is gone as soon as its run is taken for dead).
        from nats.js.errors import KeyWrongLastSequenceError, NotFoundError

        key = taken_key(run_id, agent_id)
        try:
            await buckets.runs.create(key, mine.encode())
            return True
        except KeyWrongLastSequenceError:
            pass
        try:
            entry = await buckets.runs.get(key)
        except NotFoundError:  # expired meanwhile: the next look takes it
            return False
        taker = (entry.value or b"").decode()
        if taker == mine:
            return True
        if await self.run_alive(taker):
            return False
        try:  # its taker stopped too: whoever replaces that claim first takes it up
            await buckets.runs.update(key, mine.encode(), last=entry.revision)
        except KeyWrongLastSequenceError:
            return False
        return True

    async def end(self, buckets: Buckets | None) -> None:
        """Ends this store's run (its heartbeat stops and its key goes at once)."""
        beating, self._beating = self._beating, None
        if beating is not None:
            await stop_task(beating)
        run_id, self._run_id = self._run_id, None
        if run_id is not None and buckets is not None:
            try:
                await buckets.runs.purge(live_key(run_id))
            except nats_failures() as exc:  # it expires on its own within the bound
                logger.warning("run %s: not ended at once: %s", run_id, exc)


async def _keys(buckets: Buckets, *, runs: bool) -> list[str]:
    """The run keys of the runs bucket (``live.``) or the tasks bucket (``run.``)."""
    bucket, prefix = (buckets.names.runs, LIVE) if runs else (buckets.names.tasks, RUN)
    return list(await scan(buckets.js, bucket, f"{prefix}>", meta_only=True))
