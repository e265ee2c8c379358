"""The bot with its agents on one ``harness worker`` process that reaches a real nats-server
through a proxy a test cuts and restores (``CuttableProxy``), the worker running the real CLI
against the scripted model."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

from bot.settings import BotOptions
from harness.runtime.nats_hosting import NatsHosting
from harness.runtime.nats_link import NatsSettings
from harness.testing.nats_server import NatsServer
from harness.testing.scripted_model import Script, ScriptedModel
from harness.testing.workers import start_worker, worker_env
from tests.bot.conftest import Rig, RigFactory
from tests.faults.cuttable_proxy import CuttableProxy


@dataclass
class CutOff:
    rig: Rig
    model: ScriptedModel
    proxy: CuttableProxy
    worker: asyncio.subprocess.Process


@contextlib.asynccontextmanager
async def cut_off_rig(
    rig: RigFactory,
    tmp_path: Path,
    script: Script,
    *,
    lost_after: float = 3.0,
    options: BotOptions | None = None,
) -> AsyncIterator[CutOff]:
    """The bot (with ``options``), its worker judged lost after ``lost_after`` s without a
    word."""
    async with (
        NatsServer(tmp_path / "nats") as nats,
        CuttableProxy(nats.port) as proxy,
        ScriptedModel(script) as model,
    ):
        worker = await start_worker("w1", proxy.url, worker_env(model.env()), tmp_path)
        try:
            hosting = NatsHosting(NatsSettings(nats.url), lost_after=lost_after)
            async with rig(runtime=hosting, options=options) as r:
                yield CutOff(r, model, proxy, worker)
        finally:
            worker.terminate()
            await worker.wait()
