"""A bot whose store is on NATS keeps its ledger there (replicas share it): a request is
answered through it, and /readyz says whether the replica reaches the server, as the server
goes away and comes back, and names the leases the replica holds."""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from harness.config.store_schema import StoreSettings
from harness.project import Project, load_project
from harness.tasks.nats_ledger import NatsLedger
from harness.testing.held_runtime import HeldRuntime
from harness.testing.nats_server import NatsServer
from tests.bot.conftest import RigFactory
from tests.bot.test_health import WAIT, get, until

pytestmark = [pytest.mark.anyio, pytest.mark.nats]


@pytest.fixture
async def nats(tmp_path: Path) -> AsyncIterator[NatsServer]:
    async with NatsServer(tmp_path / "nats") as server:
        yield server


@pytest.fixture
def project(project_dir: Path, nats: NatsServer) -> Project:
    loaded = load_project(project_dir / "config.yaml")
    store = StoreSettings(kind="nats", url=nats.url, prefix="readyz")
    return dataclasses.replace(loaded, config=dataclasses.replace(loaded.config, store=store))


async def test_readyz_follows_the_nats_server_of_the_store_and_names_the_leases_held(
    rig: RigFactory, nats: NatsServer
) -> None:
    async with rig(runtime=HeldRuntime(), health_port=0) as r:
        readyz = f"http://127.0.0.1:{r.server.health_port}/readyz"
        # The only replica: it holds the singletons' leases.
        singletons = "pull requests, take over stopped replicas"
        assert await get(readyz) == (200, f"ready\nleases held: {singletons}\n")

        assert await r.server.leases.hold("routines", 30.0)
        held = "leases held: pull requests, routines, take over stopped replicas"
        assert await get(readyz) == (200, f"ready\n{held}\n")

        await nats.stop()
        text = await until(readyz, 503)
        [failing, leases] = text.splitlines()
        assert failing.startswith(f"ledger: the ledger at NATS {nats.url} cannot be reached")
        assert leases == held

        await nats.start()
        assert await until(readyz, 200) == f"ready\n{held}\n"


async def test_a_request_is_answered_through_the_ledger_on_nats_and_nothing_is_left_owed(
    rig: RigFactory, project: Project
) -> None:
    async with rig(runtime=HeldRuntime()) as r:
        sent = await r.say("fix the login bug")
        await r.held.wait_started(1, WAIT)
        r.held.release()

        assert await r.final_reaction("D1", sent.event["ts"], WAIT) == "white_check_mark"
        await r.bot.outbox.settled(WAIT)

    # What another replica would find: no request, watch or delivery left over.
    ledger = await NatsLedger.open(project.config.store)
    try:
        assert await ledger.pending() == [] and await ledger.failed() == []
        assert await ledger.watches() == [] and await ledger.intake() == []
        assert [key for key, _ in await ledger.recent(0)] != []  # the event's id, seen
    finally:
        await ledger.close()
