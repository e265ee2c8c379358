"""What a worker owes NATS for each agent it runs: the run's events (journal lines, tool use,
its outcome), published to JetStream in order, each stored once (its de-duplication id), and
tried until NATS has them however long NATS is away.

A worker that stops before NATS has them (stopped during an outage) keeps what is left in a
spool of its own, ``<workspaces>/.worker/owed`` (a folder of the worker's, never an agent's:
task folders are named by slugs, which never start with a dot), and the next worker started
with the same workspaces folder publishes them once NATS is there, then removes them: a
result finished during an outage reaches the harness even across a worker's restart.
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Any

from harness.retry import Backoff, retrying
from harness.runtime.nats_link import NatsLink, nats_errors
from harness.runtime.wire import Event, EventKind
from harness.spool import Spool

logger = logging.getLogger(__name__)

# How a worker waits before trying NATS again (a publish).
NATS_BACKOFF = Backoff(first=0.2, cap=5.0)
OWED_FOLDER = Path(".worker") / "owed"


class Reporter:
    """Publishes one run's events to JetStream, in order, each exactly once."""

    def __init__(self, link: NatsLink, agent_id: str, worker: str) -> None:
        self.link = link
        self.agent_id = agent_id
        self.worker = worker
        self._seq = 0
        self._queue: asyncio.Queue[Event | None] = asyncio.Queue()
        self._unsent: list[Event] = []  # reported, not yet stored by JetStream, in order
        self._task = asyncio.get_running_loop().create_task(self._publish_all())

    def report(self, kind: EventKind, data: dict[str, Any]) -> None:
        self._seq += 1
        event = Event(self._seq, kind, self.worker, data)
        self._unsent.append(event)
        self._queue.put_nowait(event)

    async def close(self) -> None:
        """Every event reported so far is in JetStream."""
        self._queue.put_nowait(None)
        await self._task

    def abandon(self) -> list[Event]:
        """Stops trying to store what is not stored yet (a worker stopping while NATS is
        away): those events, in order (none once closed)."""
        self._task.cancel()
        return list(self._unsent)

    async def _publish_all(self) -> None:
        while (event := await self._queue.get()) is not None:
            await publish(self.link, self.agent_id, event)
            self._unsent.pop(0)


async def publish(link: NatsLink, agent_id: str, event: Event) -> None:
    """Stores ``event`` of the agent's run in JetStream, trying until it is stored (once:
    JetStream drops a repeat by its id)."""
    subject = link.subjects.events(agent_id)
    headers = {"Nats-Msg-Id": event.msg_id(agent_id)}

    def not_yet(exc: BaseException, _delay: float) -> None:
        logger.warning("event %s of %s not stored yet: %s", event.seq, agent_id, exc)

    # NATS down or restarting: the event must not be lost, so it is tried until stored.
    await retrying(
        lambda: link.js.publish(subject, event.encode(), headers=headers, timeout=5),
        retry_on=nats_errors(),
        backoff=NATS_BACKOFF,
        on_retry=not_yet,
    )


class OwedReports:
    """The events a stopped worker still owed NATS, by agent, kept under ``workspaces``."""

    def __init__(self, workspaces: Path, worker: str) -> None:
        self.spool = Spool(workspaces / OWED_FOLDER)
        self.worker = worker

    async def keep(self, agent_id: str, events: list[Event]) -> None:
        """Keeps the events NATS did not take before this worker stopped (logged either
        way: kept for the next start, or lost with the reason)."""
        outcome = " and its outcome" if any(e.kind == "outcome" for e in events) else ""
        data = {"agent_id": agent_id, "events": [e.encode().decode("utf-8") for e in events]}
        try:
            await self.spool.put(agent_id, data)
        except (OSError, ValueError) as exc:
            logger.error("worker %s: %d event(s)%s of agent %s could not be stored in NATS nor "
                         "kept on disk (%s): lost", self.worker, len(events), outcome, agent_id,
                         exc)  # fmt: skip
            return
        logger.warning("worker %s: %d event(s)%s of agent %s not stored in NATS yet: kept in "
                       "%s, published when a worker with these workspaces starts with NATS "
                       "there", self.worker, len(events), outcome, agent_id,
                       self.spool.folder)  # fmt: skip

    async def publish_all(self, link: NatsLink) -> None:
        """Publishes what a stopped worker kept, in order, then forgets it; tried until NATS
        has it (cancelled, what is left stays kept)."""
        try:
            kept = await self.spool.entries()
        except OSError as exc:
            logger.error("worker %s: cannot read %s: %s", self.worker, self.spool.folder, exc)
            return
        for name, data in kept:
            try:
                agent_id = str(data["agent_id"])
                events = [Event.decode(str(e).encode("utf-8")) for e in data["events"]]
            except (ValueError, KeyError, TypeError) as exc:
                logger.warning("worker %s: %s in %s skipped: %s", self.worker, name,
                               self.spool.folder, exc)  # fmt: skip
                continue
            for event in events:
                await publish(link, agent_id, event)
            await self.spool.drop(name)
            logger.warning("worker %s: published the %d event(s) of agent %s kept since a worker "
                           "stopped before NATS had them", self.worker, len(events),
                           agent_id)  # fmt: skip
