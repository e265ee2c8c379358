"""Where a new agent meets the spend limits: its payers' spending read from the store, then
the limits checked and its allowance reserved with no await in between (``reserve``), so
agents drafted at once in this process never pass a limit between them.

An allowance is held in memory from its reservation until the store surely shows it: until a
spending read that began after its record was saved. Dispatches of other processes (a second
bot, ``harness run``) are seen once their records are saved, so two processes drafting in the
same instant can each pass a limit with their own agent once.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from harness.agents.spend_limits import allowance, earliest_day, payers
from harness.clock import Clock
from harness.config.limits_schema import LimitSettings
from harness.tasks.model import DispatchRecord, Task
from harness.tasks.spending import Spend, spend_of
from harness.tasks.store import Store


@dataclass(frozen=True)
class Spending:
    """The rows a spending read returned, and when it began (in saves seen)."""

    rows: tuple[Spend, ...]
    began: int


@dataclass
class _Held:
    row: Spend
    saved: int | None = None  # the count of saves once its record was saved


class SpendGate:
    def __init__(self, limits: LimitSettings, store: Store, clock: Clock, *, simulated: bool):
        self._limits = limits
        self._store = store
        self._clock = clock
        # Costs of a scripted model never count: nothing to check.
        self._off = simulated or not limits.any
        self._held: dict[str, _Held] = {}
        self._saves = 0

    async def spending(self, task: Task) -> Spending | None:
        """What the limits need to decide on a new agent of ``task``; None when none applies
        (no limit configured, costs simulated, an admin raised them for the task)."""
        if self._off or task.limits_raised_by is not None:
            return None
        began = self._saves
        rows = await self._store.spending(earliest_day(self._clock.now()))
        return Spending(tuple(rows), began)

    def reserve(
        self, spending: Spending | None, task: Task, record: DispatchRecord
    ) -> float | None:
        """The agent's allowance (``record.budget_usd`` within the limits' room), reserved
        for it; SpendLimitError when a limit has no room left. Blocks nothing: call it with
        no await between it and the agent's registration."""
        if spending is None:
            return record.budget_usd
        for agent_id, held in list(self._held.items()):
            if held.saved is not None and held.saved <= spending.began:
                del self._held[agent_id]  # the read saw its record
        seen = {row.agent_id for row in spending.rows}
        rows = [*spending.rows, *(h.row for a, h in self._held.items() if a not in seen)]
        who = payers(task, record.requested_by)
        left = allowance(self._limits, who, rows, self._clock.now(), record.budget_usd)
        reserved = _row_of(task, record, left)
        if reserved is not None:
            self._held[record.agent_id] = _Held(reserved)
        return left

    def saved(self, agent_id: str) -> None:
        """Its record is in the store: reads that begin from now on show it."""
        self._saves += 1
        if (held := self._held.get(agent_id)) is not None:
            held.saved = self._saves

    def forget(self, agent_id: str) -> None:
        """Its dispatch failed before it was saved: nothing is held for it."""
        self._held.pop(agent_id, None)


def _row_of(task: Task, record: DispatchRecord, allowance: float | None) -> Spend | None:
    holding = dataclasses.replace(record, budget_usd=allowance)
    rows = spend_of(dataclasses.replace(task, dispatches=(holding,)))
    return rows[0] if rows else None
