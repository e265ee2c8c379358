"""NATS goes away under the harness. A real nats-server is stopped and started again on the
same port and store while an agent runs on a worker: an outage of any length loses nothing
(the result waits in JetStream), a kill sent meanwhile reaches the worker when NATS is back,
and a worker cut off alone for longer than ``lostAfterSeconds`` is judged lost, its late
result then taking the interruption's place."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from nats.js.errors import ServiceUnavailableError

from harness.agents.orchestrator import Orchestrator
from harness.project import Project, build_orchestrator
from harness.runtime.nats_hosting import NatsHosting
from harness.runtime.nats_link import NatsLink, NatsSettings
from harness.runtime.worker import STOP_SECONDS, Worker
from harness.testing.held_runtime import HeldRuntime
from harness.testing.nats_server import NatsServer
from tests.faults.cuttable_proxy import CuttableProxy, quiet_port

pytestmark = [pytest.mark.anyio, pytest.mark.slow, pytest.mark.nats, pytest.mark.waits]

WAIT = 30.0
LOST_AFTER = 5.0


PROMPT_STOP = 3.0  # from SIGTERM to the process gone


@dataclass
class Outage:
    server: NatsServer
    held: HeldRuntime
    hosting: NatsHosting
    orchestrator: Orchestrator
    stop_worker: asyncio.Event
    worker: asyncio.Future[None]


async def until(predicate: Callable[[], bool], timeout: float = WAIT) -> None:
    """Polls ``predicate`` (a state this test cannot be told of) with a bound."""
    async with asyncio.timeout(timeout):
        while not predicate():
            await asyncio.sleep(0.02)


@contextlib.asynccontextmanager
async def outage_rig(project: Project, tmp_path: Path) -> AsyncIterator[Outage]:
    """NATS, an in-process worker running held agents, and an orchestrator sending its
    agents to it (a worker silent for LOST_AFTER seconds is lost)."""
    async with NatsServer(tmp_path / "nats") as server:
        held = HeldRuntime()
        worker = Worker(
            NatsSettings(server.url), held, name="w1", slots=2, workspaces=tmp_path / "w1"
        )
        stop, ready = asyncio.Event(), asyncio.Event()
        serving = asyncio.ensure_future(worker.serve(stop, ready.set))
        await asyncio.wait_for(ready.wait(), WAIT)
        hosting = NatsHosting(NatsSettings(server.url), lost_after=LOST_AFTER)
        orchestrator = build_orchestrator(project, hosting)
        try:
            yield Outage(server, held, hosting, orchestrator, stop, serving)
        finally:
            if server._process is None:  # stopped by the test: back, so all can end
                await server.start()
            held.release()
            await orchestrator.shutdown()
            stop.set()
            await asyncio.wait_for(serving, WAIT)


async def agent_at_work(o: Outage) -> str:
    handle = await o.orchestrator.draft("developer", "outlast the outage")
    await o.held.wait_started(1, timeout=WAIT)
    await until(lambda: bool((info := o.orchestrator.agent(handle.agent_id)) and info.worker))
    return handle.agent_id


async def nats_stopped(o: Outage) -> NatsLink:
    """Stops the server, once the orchestrator's link has seen it go."""
    link = await o.hosting.link()
    await o.server.stop()
    await until(lambda: not link.connected)
    return link


async def test_an_outage_shorter_than_lost_after_loses_no_agent(
    project: Project, tmp_path: Path
) -> None:
    async with outage_rig(project, tmp_path) as o:
        agent_id = await agent_at_work(o)
        await nats_stopped(o)
        o.held.release()  # the agent ends while nobody can hear it: its outcome waits
        await asyncio.sleep(LOST_AFTER * 0.6)  # the outage itself, not a synchronisation
        await o.server.start()
        record = await o.orchestrator.wait(agent_id, WAIT)

    assert record.status == "completed", record.error
    assert record.result is not None and record.result.summary == "did: outlast the outage"
    assert record.error is None


async def test_an_agent_whose_events_cannot_be_followed_at_once_after_a_restart_completes(
    project: Project, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A restarted server may not serve JetStream for a moment: following the run's events
    again fails at first. It is tried again, and the agent ends with its result (once
    "'NoneType' object has no attribute 'unsubscribe'": an internal harness error)."""
    async with outage_rig(project, tmp_path) as o:
        agent_id = await agent_at_work(o)
        link = await o.hosting.link()
        subscribe = link.js.subscribe
        refused: list[tuple[Any, ...]] = []

        async def not_yet(*args: Any, **kwargs: Any) -> Any:
            if len(refused) < 3:
                refused.append(args)
                raise ServiceUnavailableError(description="JetStream not ready yet")
            return await subscribe(*args, **kwargs)

        monkeypatch.setattr(link.js, "subscribe", not_yet)
        await nats_stopped(o)
        o.held.release()
        await o.server.start()
        record = await o.orchestrator.wait(agent_id, WAIT)

    assert record.status == "completed", record.error
    assert record.result is not None and record.result.summary == "did: outlast the outage"
    assert len(refused) == 3  # it was refused, and tried again


async def test_a_quiet_link_after_reconnecting_is_not_a_lost_worker(
    project: Project, tmp_path: Path
) -> None:
    """Two outages in a row, each shorter than the bound, together longer: the worker is
    heard again between them, and the agent goes on to its end."""
    async with outage_rig(project, tmp_path) as o:
        agent_id = await agent_at_work(o)
        link = await o.hosting.link()
        for _ in range(2):
            await nats_stopped(o)
            await asyncio.sleep(LOST_AFTER * 0.5)  # the outage itself
            await o.server.start()
            await until(lambda: link.connected)
        info = o.orchestrator.agent(agent_id)
        assert info is not None and info.status == "running"
        o.held.release()
        record = await o.orchestrator.wait(agent_id, WAIT)

    assert record.status == "completed", record.error


async def test_an_outage_longer_than_lost_after_loses_no_result(
    project: Project, tmp_path: Path
) -> None:
    """The agent finishes on its worker while NATS is away for longer than the limit: this
    side knows nothing of the worker meanwhile, so nobody is told it was interrupted, and its
    result, stored by the worker when NATS is back, ends it; told once."""
    async with outage_rig(project, tmp_path) as o:
        finished: list[str] = []
        o.orchestrator.subscribe(
            lambda e: finished.append(e.record.status) if e.kind == "finished" else None
        )
        agent_id = await agent_at_work(o)
        await nats_stopped(o)
        o.held.release()  # the agent ends while nobody can hear it: its outcome waits
        await asyncio.sleep(LOST_AFTER * 1.5)  # the outage itself, not a synchronisation
        info = o.orchestrator.agent(agent_id)
        assert info is not None and info.status == "running"
        await o.server.start()
        record = await o.orchestrator.wait(agent_id, WAIT)
        stored = await o.orchestrator.record(agent_id)

    assert record.status == "completed", record.error
    assert record.result is not None and record.result.summary == "did: outlast the outage"
    assert stored.status == "completed" and stored.result == record.result  # task.json
    assert finished == ["completed"]


async def test_a_kill_sent_while_nats_is_away_reaches_the_worker_when_it_is_back(
    project: Project, tmp_path: Path
) -> None:
    async with outage_rig(project, tmp_path) as o:
        agent_id = await agent_at_work(o)
        link = await nats_stopped(o)
        assert await o.orchestrator.kill(agent_id, "stopped by U1")
        record = await o.orchestrator.wait(agent_id, WAIT)
        assert record.status == "killed"
        assert record.error is not None and "when the link is back" in record.error
        await o.server.start()
        await until(lambda: link.connected)
        async with asyncio.timeout(WAIT):  # the worker stopped the agent, and said so
            while (outcome := await link.stored_outcome(agent_id)) is None:
                await asyncio.sleep(0.1)

    assert outcome.status == "killed"
    assert outcome.error == "stopped by U1"


async def test_a_worker_cut_off_longer_than_lost_after_has_its_late_result_replace_the_interruption(
    project: Project, tmp_path: Path
) -> None:
    """Only the worker's link breaks (a proxy between it and NATS is cut): it is judged lost
    and the agent recorded interrupted; it finishes meanwhile, and once its link is back its
    result takes the interruption's place, told once as finished late."""
    async with NatsServer(tmp_path / "nats") as server, CuttableProxy(server.port) as proxy:
        held = HeldRuntime()
        worker = Worker(
            NatsSettings(proxy.url), held, name="w1", slots=1, workspaces=tmp_path / "w1"
        )
        stop, ready = asyncio.Event(), asyncio.Event()
        serving = asyncio.ensure_future(worker.serve(stop, ready.set))
        hosting = NatsHosting(NatsSettings(server.url), lost_after=LOST_AFTER)
        orchestrator = build_orchestrator(project, hosting)
        late: list[tuple[str, str]] = []
        orchestrator.subscribe(
            lambda e: (
                late.append((e.record.agent_id, e.record.status))
                if e.kind == "finished_late"
                else None
            )
        )
        try:
            await asyncio.wait_for(ready.wait(), WAIT)
            handle = await orchestrator.draft("developer", "outlast the outage")
            await held.wait_started(1, timeout=WAIT)
            await until(lambda: bool((i := orchestrator.agent(handle.agent_id)) and i.worker))
            await proxy.cut()
            interrupted = await orchestrator.wait(handle.agent_id, WAIT)
            held.release()  # it finishes while its worker cannot say so
            await proxy.restore()
            await until(lambda: bool(late))
            stored = await orchestrator.record(handle.agent_id)
        finally:
            held.release()
            await orchestrator.shutdown()
            stop.set()
            await asyncio.wait_for(serving, WAIT)

    assert interrupted.status == "interrupted"
    assert interrupted.error is not None and "was lost" in interrupted.error
    assert late == [(handle.agent_id, "completed")]
    assert stored.status == "completed" and stored.error is None
    assert stored.result is not None and stored.result.summary == "did: outlast the outage"


async def test_a_worker_started_before_nats_waits_and_then_serves(
    project: Project, tmp_path: Path
) -> None:
    server = NatsServer(tmp_path / "nats", port=quiet_port())
    held = HeldRuntime()
    worker = Worker(NatsSettings(server.url), held, name="w1", slots=1, workspaces=tmp_path / "w")
    stop, ready = asyncio.Event(), asyncio.Event()
    said: list[str] = []
    serving = asyncio.ensure_future(worker.serve(stop, ready.set, said.append))
    try:
        await until(lambda: bool(said))
        assert not serving.done()
        async with server:
            await asyncio.wait_for(ready.wait(), WAIT)
            hosting = NatsHosting(NatsSettings(server.url), lost_after=LOST_AFTER)
            orchestrator = build_orchestrator(project, hosting)
            try:
                handle = await orchestrator.draft("developer", "served at last")
                held.release()
                record = await orchestrator.wait(handle.agent_id, WAIT)
            finally:
                await orchestrator.shutdown()
                stop.set()
                await asyncio.wait_for(asyncio.shield(serving), WAIT)
    finally:
        stop.set()
        await asyncio.wait_for(serving, WAIT)

    assert said[0].startswith(f"waiting for NATS at {server.url} (cannot connect")
    assert record.status == "completed", record.error


async def test_a_worker_told_to_stop_while_nats_is_away_stops_within_its_bound(
    project: Project, tmp_path: Path
) -> None:
    async with outage_rig(project, tmp_path) as o:
        await agent_at_work(o)
        await nats_stopped(o)
        started = time.monotonic()
        o.stop_worker.set()  # what SIGTERM does
        await asyncio.wait_for(asyncio.shield(o.worker), STOP_SECONDS + 5)
        took = time.monotonic() - started

    assert took < STOP_SECONDS + 5


async def test_the_orchestrator_shuts_down_at_once_while_nats_is_away(
    project: Project, tmp_path: Path
) -> None:
    """What SIGTERM or Ctrl-C does to ``harness run``, in the middle of an outage."""
    async with outage_rig(project, tmp_path) as o:
        agent_id = await agent_at_work(o)
        await nats_stopped(o)
        await asyncio.wait_for(o.orchestrator.shutdown("interrupted by SIGTERM"), PROMPT_STOP)
        record = await o.orchestrator.wait(agent_id, WAIT)

    assert record.status == "interrupted"
    assert record.error is not None and "cut off from NATS" in record.error
