"""The NATS task store on a real nats-server: the conformance suites both other stores pass,
writers in two processes' stores on one task, and the run of a killed process."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from harness.errors import HarnessError, TaskDamagedError
from harness.tasks.model import Decision, ThreadRef
from harness.tasks.nats_records import task_key
from harness.tasks.nats_store import NatsTaskStore
from harness.tasks.store import Store
from harness.testing.nats_server import NatsServer
from harness.testing.records import make_record
from tests.harness.tasks.nats_fixtures import module_server, settings_for
from tests.harness.tasks.run_liveness_suite import (
    RunLivenessConformance,
    two_processes_take_up_a_stopped_run_s_agent_once,
)
from tests.harness.tasks.task_files_suite import TaskFilesConformance
from tests.harness.tasks.task_store_suite import TaskStoreConformance

pytestmark = [pytest.mark.anyio, pytest.mark.nats]
server = module_server()


class TestNatsTaskStore(TaskStoreConformance, TaskFilesConformance, RunLivenessConformance):
    @pytest.fixture
    async def store(self, nats_url: str) -> AsyncIterator[Store]:
        store = NatsTaskStore(settings_for(nats_url))
        yield store
        await store.close()


async def test_two_processes_on_one_nats_take_up_a_stopped_run_s_agent_once(
    nats_url: str,
) -> None:
    settings = settings_for(nats_url)
    first, second = NatsTaskStore(settings), NatsTaskStore(settings)
    try:
        await two_processes_take_up_a_stopped_run_s_agent_once(first, second)
    finally:
        await first.close()
        await second.close()


async def test_two_stores_writing_one_task_at_once_lose_no_record(nats_url: str) -> None:
    settings = settings_for(nats_url)
    first, second = NatsTaskStore(settings), NatsTaskStore(settings)
    try:
        slug = (await first.create("Busy task")).slug

        await asyncio.gather(
            *(first.save_dispatch(slug, make_record(f"a{i}")) for i in range(15)),
            *(second.save_dispatch(slug, make_record(f"b{i}")) for i in range(15)),
            second.add_decision(slug, Decision("Use REST", "simpler", "2026-01-01T10:00:00Z")),
        )  # fmt: skip

        for store in (first, second):
            task = await store.get(slug)
            assert len(task.dispatches) == 30 and len(task.decisions) == 1
            assert (await store.summaries())[0].dispatch_count == 30
            assert (await store.record("b7")).agent_id == "b7"
    finally:
        await first.close()
        await second.close()


async def test_stores_with_other_prefixes_on_one_server_see_none_of_each_others_tasks(
    nats_url: str,
) -> None:
    mine, theirs = NatsTaskStore(settings_for(nats_url)), NatsTaskStore(settings_for(nats_url))
    try:
        await mine.create("Mine", ThreadRef("C1", "1.1"))

        assert await theirs.summaries() == []
        assert await theirs.find_by_thread(ThreadRef("C1", "1.1")) is None
        assert (await theirs.create("Mine")).slug == "mine"
    finally:
        await mine.close()
        await theirs.close()


BROKEN = (
    b'{"created": "2026-01-01T00:00:00Z", "description": "Do it", "thread": '
    b'{"channel": "C1", "threadTs": "1.1"}, "dispatches": [{"agentId": 7}]}'
)


async def test_a_task_written_by_hand_that_does_not_read_is_listed_as_damaged_and_repairs(
    nats_url: str,
) -> None:
    store = NatsTaskStore(settings_for(nats_url))
    try:
        await store.create("Other")
        buckets = await store.buckets()
        await buckets.tasks.put(task_key("do-it"), BROKEN)  # `nats kv put`, no summary

        assert [line.slug for line in await store.summaries()] == ["other"]
        [damaged] = await store.damaged()
        assert (damaged.slug, damaged.thread) == ("do-it", ThreadRef("C1", "1.1"))
        assert "dispatches[0]" in damaged.problem
        with pytest.raises(TaskDamagedError):
            await store.get("do-it")

        report = await store.repair("do-it")

        assert report.repaired and report.moved_to is not None
        assert (await store.get("do-it")).thread == ThreadRef("C1", "1.1")
        assert await store.damaged() == []
        assert [line.slug for line in await store.summaries()] == ["other", "do-it"]
        assert await store.find_by_thread(ThreadRef("C1", "1.1")) is not None
        kept = report.moved_to.rsplit("/", 1)[1]
        assert await store.read_text("do-it", kept) == BROKEN.decode()
    finally:
        await store.close()


async def test_a_task_written_over_by_hand_is_listed_as_damaged_once_read(
    nats_url: str,
) -> None:
    store = NatsTaskStore(settings_for(nats_url))
    try:
        slug = (await store.create("Do it", ThreadRef("C1", "1.1"))).slug
        buckets = await store.buckets()
        await buckets.tasks.put(task_key(slug), BROKEN)

        with pytest.raises(TaskDamagedError):
            await store.get(slug)

        assert await store.summaries() == []
        assert [d.slug for d in await store.damaged()] == [slug]
    finally:
        await store.close()


HOLDER = """
import asyncio, sys
from harness.config.store_schema import StoreSettings
from harness.tasks.nats_store import NatsTaskStore

async def main():
    store = NatsTaskStore(StoreSettings(kind="nats", url=sys.argv[1], prefix=sys.argv[2]),
                          heartbeat_seconds=0.5)
    print(await store.begin_run(), flush=True)
    await asyncio.Event().wait()

asyncio.run(main())
"""


@pytest.mark.subprocess
async def test_the_run_of_a_killed_process_ends_within_the_heartbeat_bound(
    nats_url: str,
) -> None:
    settings = settings_for(nats_url)
    holder = await asyncio.create_subprocess_exec(
        sys.executable, "-c", HOLDER, nats_url, settings.prefix,
        stdout=asyncio.subprocess.PIPE, env={**os.environ},
    )  # fmt: skip
    store = NatsTaskStore(settings, heartbeat_seconds=0.5)
    try:
        assert holder.stdout is not None
        run_id = (await asyncio.wait_for(holder.stdout.readline(), 20)).decode().strip()
        assert await store.run_alive(run_id)
        assert await store.ended_runs() == []

        holder.send_signal(signal.SIGKILL)
        await holder.wait()
        # The heartbeat expires 1.5 s (3 beats) after the last one; a bound of 10 s.
        async with asyncio.timeout(10):
            while await store.run_alive(run_id):
                await asyncio.sleep(0.1)

        assert await store.ended_runs() == [run_id]
        await store.forget_run(run_id)
        assert await store.ended_runs() == []
    finally:
        if holder.returncode is None:
            holder.kill()
            await holder.wait()
        await store.close()


@pytest.mark.waits
async def test_a_store_whose_server_went_away_says_so_with_the_fix(tmp_path: Path) -> None:
    async with NatsServer(tmp_path / "nats") as nats:
        store = NatsTaskStore(settings_for(nats.url))
        try:
            slug = (await store.create("Do it")).slug
            await nats.stop()

            with pytest.raises(HarnessError) as caught:
                await store.save_dispatch(slug, make_record("a1"))

            assert f"the task store at NATS {nats.url} cannot be reached" in caught.value.message
            assert "nats-server" in caught.value.fix
        finally:
            await store.close()
