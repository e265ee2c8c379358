"""What every store must do as ``RunLiveness`` (runs begun, alive, ended and forgotten; a
stopped run's agents taken up once), as a pytest suite both stores run.

Subclass it in a test module (its name starting with ``Test``) and give it a ``store`` fixture
yielding a fresh, empty store (and closing it afterwards); pytest runs every test below
against it. Behaviour only one store has (files on disk, the index) is tested next to that
store, not here.
"""

from __future__ import annotations

import asyncio
import re

import pytest

from harness.tasks.store import Store
from harness.testing.records import make_record


@pytest.mark.anyio
async def two_processes_take_up_a_stopped_run_s_agent_once(first: Store, second: Store) -> None:
    """Two stores on one backend (two processes' runs): the agent a stopped run left is taken
    up by the first to ask, again by it, by no other while it lives, and by another once the
    taker's run has ended too."""
    stopped = "0123456789abcdef"
    assert await first.take_up(stopped, "a1")
    assert await first.take_up(stopped, "a1")  # the taker asking again (a loop's next look)
    assert not await second.take_up(stopped, "a1")
    assert await second.take_up(stopped, "a2")  # another agent of that run: its own claim
    assert not await first.take_up(stopped, "a2")
    await first.close()  # the taker stops too
    assert await second.take_up(stopped, "a1")


class RunLivenessConformance:
    """The RunLiveness contract: runs begun, alive, ended and forgotten."""

    @pytest.mark.parametrize(
        ("run_id", "agent_id"),
        [("../../etc", "a1"), ("0123456789abcdef", "../a1"), ("0123456789abcdef", "a.b"), ("", "")],
    )
    async def test_malformed_ids_are_never_taken_up(
        self, store: Store, run_id: str, agent_id: str
    ) -> None:
        assert not await store.take_up(run_id, agent_id)

    async def test_a_stopped_run_s_agent_is_taken_up_by_this_run_again_and_again(
        self, store: Store
    ) -> None:
        assert await store.take_up("0123456789abcdef", "a1")
        assert await store.take_up("0123456789abcdef", "a1")

    async def test_a_dispatch_keeps_the_run_and_pid_that_ran_it(self, store: Store) -> None:
        slug = (await store.create("Do it")).slug
        record = make_record("a1", host_pid=1, run_id="0123456789abcdef")

        await store.save_dispatch(slug, record)

        assert (await store.get(slug)).dispatches == (record,)
        assert await store.unfinished() == [(slug, record)]

    async def test_begin_run_gives_one_hex_id_that_is_alive(self, store: Store) -> None:
        run_id = await store.begin_run()

        assert re.fullmatch(r"[0-9a-f]{8,64}", run_id)
        assert await store.begin_run() == run_id
        assert await store.run_alive(run_id)
        assert await store.ended_runs() == []

    async def test_runs_begun_at_once_are_one_run(self, store: Store) -> None:
        ids = await asyncio.gather(*(store.begin_run() for _ in range(5)))

        assert len(set(ids)) == 1

    @pytest.mark.parametrize(
        "run_id", ["0123456789abcdef", "../../etc/passwd", "", "ABCDEF0123456789", "f" * 65]
    )
    async def test_unknown_and_malformed_runs_are_not_alive(
        self, store: Store, run_id: str
    ) -> None:
        await store.begin_run()

        assert not await store.run_alive(run_id)
        await store.forget_run(run_id)  # nothing to forget: no error
        assert await store.ended_runs() == []

    async def test_a_closed_stores_run_has_ended_until_it_is_forgotten(self, store: Store) -> None:
        run_id = await store.begin_run()

        await store.close()

        assert not await store.run_alive(run_id)
        assert await store.ended_runs() == [run_id]
        await store.forget_run(run_id)
        assert await store.ended_runs() == []
        assert not await store.run_alive(run_id)

    async def test_a_live_run_is_never_forgotten(self, store: Store) -> None:
        run_id = await store.begin_run()

        await store.forget_run(run_id)

        assert await store.run_alive(run_id)
        assert await store.begin_run() == run_id

    async def test_a_run_begun_after_close_is_a_new_run(self, store: Store) -> None:
        first = await store.begin_run()
        await store.close()

        second = await store.begin_run()

        assert second != first
        assert await store.run_alive(second)
        assert not await store.run_alive(first)
        assert await store.ended_runs() == [first]
