"""The agent pool: which agents are queued or running, a FIFO concurrency cap, and kill."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import deque
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from harness.agent_spec import AgentControl
from harness.results import Progress

# "waiting": blocked in await_agent on other agents, its slot lent to the queue.
AgentState = Literal["queued", "running", "waiting"]


@dataclass
class PoolEntry:
    """A live agent. Mutable: its state moves from queued to running."""

    agent_id: str
    role: str
    task_slug: str
    cwd: Path
    parent_id: str | None
    depth: int
    queued_at: str
    control: AgentControl = field(default_factory=AgentControl)
    state: AgentState = "queued"
    started_at: str | None = None
    # When set, a kill ends the dispatch as ``interrupted`` (shutdown) rather than ``killed``.
    interrupted: bool = False
    progress: Progress | None = None
    _started_monotonic: float = field(default_factory=time.monotonic)
    _killed: asyncio.Event = field(default_factory=asyncio.Event)


@dataclass(frozen=True)
class AgentInfo:
    """A snapshot of a live agent, for listings."""

    agent_id: str
    role: str
    task_slug: str
    cwd: str
    parent_id: str | None
    depth: int
    status: AgentState
    queued_at: str
    started_at: str | None
    elapsed_seconds: float
    activity: str


class AgentPool:
    def __init__(self, max_concurrent: int) -> None:
        if max_concurrent < 1:
            raise ValueError("max_concurrent must be at least 1")
        self.max_concurrent = max_concurrent
        self._entries: dict[str, PoolEntry] = {}
        self._running = 0
        self._waiters: deque[asyncio.Future[None]] = deque()

    def register(self, entry: PoolEntry) -> None:
        self._entries[entry.agent_id] = entry

    def get(self, agent_id: str) -> PoolEntry | None:
        return self._entries.get(agent_id)

    def snapshot(self) -> list[AgentInfo]:
        now = time.monotonic()
        return [_info(e, now) for e in self._entries.values()]

    def info(self, agent_id: str) -> AgentInfo | None:
        """The snapshot of one live agent; None when it is not live."""
        entry = self._entries.get(agent_id)
        return _info(entry, time.monotonic()) if entry is not None else None

    async def acquire(self, entry: PoolEntry) -> bool:
        """Wait, first come first served, for a slot. False when killed while queued."""
        if entry.control.kill_requested:
            return False
        if self._running < self.max_concurrent and not self._waiters:
            self._running += 1
            return True
        turn: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append(turn)
        killed = asyncio.ensure_future(entry._killed.wait())
        either: list[asyncio.Future[Any]] = [turn, killed]
        try:
            await asyncio.wait(either, return_when=asyncio.FIRST_COMPLETED)
        finally:
            killed.cancel()
        if turn.done() and not turn.cancelled():
            if entry.control.kill_requested:
                self._release_slot()
                return False
            return True
        turn.cancel()
        self._waiters.remove(turn)
        return False

    @contextlib.asynccontextmanager
    async def lend_slot(self, entry: PoolEntry | None) -> AsyncIterator[None]:
        """While an agent waits on agents it drafted, its slot serves the queue; otherwise a
        coordinator awaiting a queued agent would hold the slot that agent needs (deadlock).
        Afterwards it takes the next free slot ahead of the queue. If the wait ends in an
        error (the agent is being killed), the slot is not taken back."""
        if entry is None or entry.state != "running":
            yield
            return
        entry.state = "waiting"
        self._release_slot()
        yield
        if self._running < self.max_concurrent and not self._waiters:
            self._running += 1
        else:
            turn: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._waiters.appendleft(turn)
            try:
                await turn
            except asyncio.CancelledError:
                if turn.done() and not turn.cancelled():
                    self._release_slot()
                elif turn in self._waiters:
                    self._waiters.remove(turn)
                raise
        entry.state = "running"

    def release(self, entry: PoolEntry) -> None:
        """The agent is finished: free its slot (if it had one) and forget it."""
        self._entries.pop(entry.agent_id, None)
        if entry.state == "running":
            self._release_slot()

    def _release_slot(self) -> None:
        while self._waiters:
            turn = self._waiters.popleft()
            if not turn.done():
                turn.set_result(None)  # the slot passes straight to the next in line
                return
        self._running -= 1

    async def kill(self, agent_id: str, reason: str, *, interrupted: bool = False) -> bool:
        entry = self._entries.get(agent_id)
        if entry is None:
            return False
        entry.interrupted = entry.interrupted or interrupted
        entry._killed.set()
        await entry.control.kill(reason)
        return True

    async def kill_all(self, reason: str, *, interrupted: bool = False) -> None:
        ids = list(self._entries)
        await asyncio.gather(*(self.kill(i, reason, interrupted=interrupted) for i in ids))


def _info(e: PoolEntry, now: float) -> AgentInfo:
    return AgentInfo(
        agent_id=e.agent_id,
        role=e.role,
        task_slug=e.task_slug,
        cwd=str(e.cwd),
        parent_id=e.parent_id,
        depth=e.depth,
        status=e.state,
        queued_at=e.queued_at,
        started_at=e.started_at,
        elapsed_seconds=round(now - e._started_monotonic, 1),
        activity=e.control.activity if e.state != "queued" else "waiting for a slot",
    )
