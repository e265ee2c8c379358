"""A ``harness worker`` hosting spares keeps them within the caps of the orchestrator's
config (``spares.maxIdle``, ``spares.maxMemoryMb``), as the bot's own host does: the caps
travel with the spares it is asked to keep. A real nats-server, a worker in this process,
the real Claude Code CLI in its sandbox against the scripted model."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from harness.cli.offline import scripted_env
from harness.runtime.claude import ClaudeRuntime
from harness.runtime.spec import SpareLimits
from harness.runtime.wire import decode_spare_limits, decode_spares, spares_json
from harness.testing.nats_server import NatsServer
from harness.testing.scripted_model import ScriptedModel
from harness.testing.workers import worker_in_process
from tests.harness.runtime.test_spares import WAIT, developer, script, template


@pytest.mark.anyio
@pytest.mark.nats
@pytest.mark.subprocess
async def test_a_worker_asked_for_two_spare_roles_with_max_idle_one_holds_one_spare(
    tmp_path: Path,
) -> None:
    reviewer = dataclasses.replace(developer("You review code."), name="reviewer")
    async with NatsServer(tmp_path / "nats") as server, ScriptedModel(script) as model:
        runtime = ClaudeRuntime(base_env=scripted_env(model.env()))
        async with worker_in_process(server.url, runtime, tmp_path / "worker") as (
            worker,
            hosting,
        ):
            templates = [(template(developer()), 1), (template(reviewer), 1)]
            hosting.keep_warm(templates, limits=SpareLimits(max_idle=1))
            spares = worker.host.spares
            assert spares is not None
            await spares.wait_ready(1, WAIT)
            await spares.settled(WAIT)
            held = (spares.ready, spares.started)

    assert held == (1, 1)


def test_the_caps_travel_with_the_spares_and_an_older_list_still_reads() -> None:
    plan = spares_json([(template(), 2)], SpareLimits(max_idle=1, max_memory_mb=900))
    older = json.dumps([{"spec": template().to_json(), "count": 2}]).encode()
    odd = b'{"spares": [], "maxIdle": true, "maxMemoryMb": -5}'

    assert decode_spare_limits(plan) == SpareLimits(1, 900)
    assert [n for _, n in decode_spares(plan)] == [2]
    assert [n for _, n in decode_spares(older)] == [2]
    assert decode_spare_limits(older) == SpareLimits()  # no caps said: none
    assert decode_spare_limits(odd) == SpareLimits() and decode_spares(b"{}") == []
