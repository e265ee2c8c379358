"""The agent pool: which agents are queued or running, a FIFO concurrency cap, one writer per
task at a time, and kill."""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from harness.clock import SYSTEM, Clock
from harness.errors import AgentNotFoundError
from harness.runtime.spec import AgentControl
from harness.tasks.model import Progress

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
    # Progress is written to the record one report at a time, and never after the final record.
    record_lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    record_closed: bool = False
    # An agent that can change files: one at a time per task (they share its workspace).
    writes: bool = False
    holds_task: bool = False
    # What the agent has said so far (its text blocks, in order), for front ends that show it.
    said: list[str] = field(default_factory=list)
    # Who asked for its task: they and the admins may stop it.
    requester: str | None = None
    _started_monotonic: float = 0.0  # the pool's clock when it was registered
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
    worker: str | None = None  # the worker running it, when not this process
    requester: str | None = None  # who asked for its task


class _Gate:
    """A first-come-first-served turnstile for ``capacity`` holders at a time. A turn given up
    passes straight to the next in line; ``retake`` goes to the front of the line."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.holders = 0
        self.line: deque[asyncio.Future[None]] = deque()

    @property
    def idle(self) -> bool:
        return self.holders == 0 and not self.line

    async def take(self, killed: asyncio.Event) -> bool:
        """Wait for a turn; False (and no turn held) when ``killed`` is set first."""
        if killed.is_set():
            return False
        if self.holders < self.capacity and not self.line:
            self.holders += 1
            return True
        turn: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.line.append(turn)
        kill = asyncio.ensure_future(killed.wait())
        either: list[asyncio.Future[Any]] = [turn, kill]
        try:
            await asyncio.wait(either, return_when=asyncio.FIRST_COMPLETED)
        finally:
            kill.cancel()
        if turn.done() and not turn.cancelled():
            if killed.is_set():
                self.give()
                return False
            return True
        turn.cancel()
        self.line.remove(turn)
        return False

    async def retake(self) -> None:
        """A turn again, ahead of everyone in line (cancellation leaves no turn held)."""
        if self.holders < self.capacity and not self.line:
            self.holders += 1
            return
        turn: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.line.appendleft(turn)
        try:
            await turn
        except asyncio.CancelledError:
            if turn.done() and not turn.cancelled():
                self.give()
            elif turn in self.line:
                self.line.remove(turn)
            raise

    def give(self) -> None:
        while self.line:
            turn = self.line.popleft()
            if not turn.done():
                turn.set_result(None)
                return
        self.holders -= 1


class AgentPool:
    """Live agents under two rules: at most ``max_concurrent`` run at once, and at most one
    agent that can write runs in a task at a time (they share the task's workspace); agents
    that only read run alongside."""

    def __init__(self, max_concurrent: int, clock: Clock = SYSTEM) -> None:
        if max_concurrent < 1:
            raise ValueError("max_concurrent must be at least 1")
        self.max_concurrent = max_concurrent
        self._clock = clock  # how long an agent has been live, for listings
        self._entries: dict[str, PoolEntry] = {}
        self._slots = _Gate(max_concurrent)
        self._writers: dict[str, _Gate] = {}

    def register(self, entry: PoolEntry) -> None:
        entry._started_monotonic = self._clock.monotonic()
        self._entries[entry.agent_id] = entry

    def get(self, agent_id: str) -> PoolEntry | None:
        return self._entries.get(agent_id)

    def live(self, agent_id: str) -> PoolEntry:
        """The live agent's entry; AgentNotFoundError once it has ended (or never was)."""
        entry = self._entries.get(agent_id)
        if entry is None:
            raise AgentNotFoundError(agent_id)
        return entry

    def snapshot(self) -> list[AgentInfo]:
        now = self._clock.monotonic()
        return [_info(e, now) for e in self._entries.values()]

    def info(self, agent_id: str) -> AgentInfo | None:
        """The snapshot of one live agent; None when it is not live."""
        entry = self._entries.get(agent_id)
        return _info(entry, self._clock.monotonic()) if entry is not None else None

    def queued_for_slot(self) -> bool:
        """Whether agents wait for a slot (the concurrency cap is reached)."""
        return bool(self._slots.line)

    def queue_length(self) -> int:
        """How many agents wait for a slot or for their task's writer turn."""
        return len(self._slots.line) + sum(len(g.line) for g in self._writers.values())

    async def acquire(self, entry: PoolEntry) -> bool:
        """Wait, first come first served, for the task's writer turn (if the agent writes) and
        then a slot. False when killed while queued."""
        if entry.writes:
            gate = self._writers.setdefault(entry.task_slug, _Gate(1))
            if not await gate.take(entry._killed):
                self._forget_idle(entry.task_slug)
                return False
            entry.holds_task = True
        if await self._slots.take(entry._killed):
            return True
        self._give_task(entry)
        return False

    @contextlib.asynccontextmanager
    async def lend_slot(self, entry: PoolEntry | None) -> AsyncIterator[None]:
        """While an agent waits on agents it drafted (or on a human), its slot serves the
        queue, and so does its task's writer turn; otherwise a coordinator awaiting a queued
        agent would hold what that agent needs (deadlock). Afterwards it takes them back ahead
        of the queue. If the wait ends in an error (the agent is being killed), they are not
        taken back."""
        if entry is None or entry.state != "running":
            yield
            return
        entry.state = "waiting"
        self._slots.give()
        lent_task = entry.holds_task
        self._give_task(entry)
        yield
        if lent_task:
            await self._writers.setdefault(entry.task_slug, _Gate(1)).retake()
            entry.holds_task = True
        await self._slots.retake()
        entry.state = "running"

    @contextlib.asynccontextmanager
    async def waiting(self, agent_id: str | None, activity: str) -> AsyncIterator[None]:
        """A live agent blocks on something other than its own work (an agent it drafted, a
        human): its slot serves the queue meanwhile, and its status says what it waits for."""
        entry = self._entries.get(agent_id) if agent_id else None
        if entry is None:
            yield
            return
        entry.control.activity = activity
        try:
            async with self.lend_slot(entry):
                yield
        finally:
            entry.control.activity = "working"

    def release(self, entry: PoolEntry) -> None:
        """The agent is finished: free its slot and writer turn (if held) and forget it."""
        self._entries.pop(entry.agent_id, None)
        if entry.state == "running":
            self._slots.give()
        self._give_task(entry)

    def _give_task(self, entry: PoolEntry) -> None:
        if entry.holds_task:
            entry.holds_task = False
            self._writers[entry.task_slug].give()
            self._forget_idle(entry.task_slug)

    def _forget_idle(self, slug: str) -> None:
        gate = self._writers.get(slug)
        if gate is not None and gate.idle:
            del self._writers[slug]

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
        activity=e.control.activity if e.state != "queued" else _queued_activity(e),
        worker=e.control.worker,
        requester=e.requester,
    )


def _queued_activity(e: PoolEntry) -> str:
    if e.writes and not e.holds_task:
        return "waiting for the task's other writer to finish"
    return "waiting for a slot"
