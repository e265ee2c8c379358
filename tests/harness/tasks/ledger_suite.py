"""What every ledger must do (``Ledger`` in harness/tasks/ledger_protocol.py), as one pytest
suite that the SQLite ledger and the NATS ledger both run.

Subclass ``LedgerConformance`` in a test module (its name starting with ``Test``) and give it
a ``ledgers`` fixture yielding a ``Ledgers``: each ``open`` is another ledger on the same
storage (a restarted process, or a second one beside the first), all closed after the test.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import pytest

from harness.clock import SYSTEM, Clock
from harness.tasks.ledger_protocol import Ledger
from harness.testing.clock import START, FakeClock


class Ledgers:
    def __init__(self, make: Callable[[Clock], Awaitable[Ledger]]) -> None:
        self._make = make
        self._opened: list[Ledger] = []

    async def open(self, clock: Clock = SYSTEM) -> Ledger:
        ledger = await self._make(clock)
        self._opened.append(ledger)
        return ledger

    async def restart(self, ledger: Ledger) -> Ledger:
        """The same ledger as a restarted process sees it."""
        await ledger.close()
        return await self.open(ledger.clock)

    async def close(self) -> None:
        for ledger in self._opened:
            await ledger.close()


@pytest.mark.anyio
class LedgerConformance:
    async def test_seen_keys_survive_a_restart_and_old_ones_are_forgotten(
        self, ledgers: Ledgers
    ) -> None:
        ledger = await ledgers.open()
        now = SYSTEM.now().timestamp()
        await ledger.remember(["event:Ev1", "message:C1:1.1"], at=now - 10)
        await ledger.remember(["event:Ev0"], at=now - 7200)
        await ledger.remember(["event:Ev1"], at=now)  # seen again: keeps its first time

        again = await ledgers.restart(ledger)
        assert await again.recent(now - 3600) == [
            ("event:Ev1", now - 10),
            ("message:C1:1.1", now - 10),
        ]
        assert await again.recent(0) == [("event:Ev1", now - 10), ("message:C1:1.1", now - 10)]

    async def test_a_key_is_claimed_once_by_callers_racing_in_two_processes(
        self, ledgers: Ledgers
    ) -> None:
        first, second = await ledgers.open(), await ledgers.open()

        results = await asyncio.gather(
            *(ledger.claim("rerun:a1") for _ in range(5) for ledger in (first, second))
        )

        assert sorted(results) == [False] * 9 + [True]
        assert await second.claim("rerun:a2") is True
        assert await first.claim("rerun:a2") is False

    async def test_another_process_sees_a_key_claimed_without_claiming_it(
        self, ledgers: Ledgers
    ) -> None:
        first, second = await ledgers.open(), await ledgers.open()
        assert not await second.claimed("message:D1:1.0")

        assert await first.claim("message:D1:1.0")
        await first.remember(["event:Ev3"])

        assert await second.claimed("message:D1:1.0") and await second.claimed("event:Ev3")
        assert not await second.claimed("message:D1:2.0")
        assert await second.claim("message:D1:2.0")  # looking claimed nothing

    async def test_the_claim_s_winner_takes_its_request_on_in_the_same_step(
        self, ledgers: Ledgers
    ) -> None:
        first, second = await ledgers.open(), await ledgers.open()

        assert await first.claim("event:Ev9", intake=("event:Ev9", {"who": "first"}))
        assert not await second.claim("event:Ev9", intake=("event:Ev9", {"who": "second"}))

        assert [(key, data) for key, data, _ in await second.intake()] == [
            ("event:Ev9", {"who": "first"})
        ]

    async def test_a_kept_request_and_what_was_noted_on_it_survive_a_restart(
        self, ledgers: Ledgers
    ) -> None:
        ledger = await ledgers.open()
        await ledger.remember(["message:D1:1.1"], at=10.0, intake={"message:D1:1.1": {"text": "x"}})
        await ledger.annotate_intake("message:D1:1.1", waiting=True)
        await ledger.annotate_intake("message:D1:9.9", waiting=True)  # not kept: nothing added

        again = await ledgers.restart(ledger)
        assert await again.intake() == [("message:D1:1.1", {"text": "x", "waiting": True}, 10.0)]
        await again.handled("message:D1:1.1")
        assert await again.intake() == []

    async def test_owing_a_result_settles_its_watch_and_handles_its_request(
        self, ledgers: Ledgers
    ) -> None:
        ledger = await ledgers.open()
        await ledger.remember(["event:Ev1"], intake={"event:Ev1": {"text": "go"}})
        await ledger.watch("a1", {"thread": ["C1", "1.1"], "status": None}, handles="event:Ev1")
        await ledger.watch("a1", {"thread": ["C1", "1.1"], "status": "1.2"})
        await ledger.watch("a2", {"thread": ["C1", "1.1"], "status": "1.3"})
        assert await ledger.intake() == []

        entry = await ledger.owe("C1/1.1", {"steps": [{"op": "post"}]}, settles="a1")

        again = await ledgers.restart(ledger)
        assert await again.watches() == [("a2", {"thread": ["C1", "1.1"], "status": "1.3"})]
        [owed] = await again.pending()
        assert (owed.id, owed.lane, owed.data, owed.step) == (
            entry,
            "C1/1.1",
            {"steps": [{"op": "post"}]},
            0,
        )
        await again.unwatch("a2")
        assert await again.watches() == []

    async def test_watches_are_listed_in_the_order_they_were_last_written(
        self, ledgers: Ledgers
    ) -> None:
        ledger = await ledgers.open()
        for agent in ("a1", "a2", "a3"):
            await ledger.watch(agent, {"n": agent})
        await ledger.watch("a1", {"n": "again"})

        assert [agent for agent, _ in await ledger.watches()] == ["a2", "a3", "a1"]

    async def test_delivery_progress_retries_and_outcomes_are_kept(self, ledgers: Ledgers) -> None:
        ledger = await ledgers.open()
        first = await ledger.owe("C1/1.1", {"n": 1})
        second = await ledger.owe("C2/2.2", {"n": 2})
        third = await ledger.owe("C1/1.1", {"n": 3})
        await ledger.pending()

        await ledger.advance(first, 2)
        await ledger.postpone(first, 123.0, "internal_error")
        await ledger.give_up(second, "channel_not_found")
        await ledger.delivered(third)

        [pending] = await (await ledgers.restart(ledger)).pending()
        assert (pending.id, pending.step, pending.attempts, pending.due, pending.error) == (
            first,
            2,
            1,
            123.0,
            "internal_error",
        )
        [failed] = await (await ledgers.open()).failed()
        assert (failed.id, failed.error, failed.data) == (second, "channel_not_found", {"n": 2})

    async def test_a_thread_s_entries_are_listed_in_the_order_they_were_owed(
        self, ledgers: Ledgers
    ) -> None:
        ledger = await ledgers.open()
        for n in range(6):
            await ledger.owe(f"C{n % 2}/1.1", {"n": n})

        listed = await ledger.pending()

        assert [owed.data["n"] for owed in listed if owed.lane == "C0/1.1"] == [0, 2, 4]
        assert [owed.data["n"] for owed in listed if owed.lane == "C1/1.1"] == [1, 3, 5]
        assert [owed.id for owed in listed] == sorted(owed.id for owed in listed)

    async def test_a_result_owed_under_a_claim_is_owed_once_and_replaces_what_it_drops(
        self, ledgers: Ledgers
    ) -> None:
        first, second = await ledgers.open(), await ledgers.open()
        await first.watch("a1", {"x": 1})
        withdrawn = await first.owe("C1/1.1", {"n": "withdrawn"})
        stale = await second.owe("C1/1.1", {"n": "stale"})

        owed = await first.owe_once("result:a1", "C1/1.1", {"n": "result"}, settles="a1",
                                    drops=[withdrawn])  # fmt: skip
        again = await second.owe_once("result:a1", "C1/1.1", {"n": "twice"}, drops=[stale])

        assert owed is not None and again is None
        assert [o.data["n"] for o in await first.pending()] == ["result"]
        assert await second.watches() == []
        assert not await second.claim("result:a1")

    async def test_the_ledger_stamps_what_it_keeps_with_its_clock(self, ledgers: Ledgers) -> None:
        clock = FakeClock()
        ledger = await ledgers.open(clock)
        await ledger.remember(["event:Ev1"])
        clock.advance(3600)
        assert await ledger.claim("rerun:a1")
        entry = await ledger.owe("lane", {"n": 1})

        assert await ledger.recent(0) == [
            ("event:Ev1", START.timestamp()),
            ("rerun:a1", START.timestamp() + 3600),
        ]
        [owed] = await ledger.pending()
        assert (owed.id, owed.due) == (entry, clock.timestamp())  # due at once
        # An hour on, a window of half an hour forgets the first key.
        assert [key for key, _ in await ledger.recent(clock.timestamp() - 1800)] == ["rerun:a1"]

    async def test_a_probe_writes_nothing_people_see(self, ledgers: Ledgers) -> None:
        ledger = await ledgers.open()

        await ledger.probe()

        assert ledger.problem is None
        assert await ledger.pending() == [] and await ledger.watches() == []
        assert await ledger.intake() == []
