"""The ``Hosting`` whose agents run on ``harness worker`` processes, over NATS.

``run`` puts the agent on the JetStream work queue, serves its harness tool calls and
approval requests (answered by the orchestrator's ToolGateway; ``await_agent`` and
``ask_human`` may take hours), follows its events in order (journal lines, tool use, the
outcome) and returns the outcome the worker reports. The orchestrator does not know the
difference: its concurrency cap, records and audit stay as they are. See
``harness/runtime/wire.py`` for the protocol.

The agents outlive the orchestrator's process: after a restart, ``still_running`` tells which
of its unfinished dispatches a worker still runs (or has finished: the outcome waits in
JetStream), and ``adopt`` follows such an agent to its end as ``run`` would have.

A worker that goes silent (no event and no heartbeat for ``lost_after`` seconds while this
side is connected) is lost: the run ends ``interrupted`` and is not run again (an agent's side
effects and cost are not repeated behind anyone's back). The lost clock runs only while this
side is connected to NATS, and starts again when it reconnects: silence while this side is
cut off says nothing of the worker, however long. A worker judged lost that was only cut off
stores its outcome when it is back: ``on_late_outcome`` listeners get it then. A kill its
worker cannot be told is kept and delivered when it can be (``harness/runtime/aftercare.py``);
both are kept in a folder of the harness's too (``resume_aftercare``), so a restart takes
them up.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from harness.errors import HarnessError
from harness.runtime.aftercare import Aftercare, LateListener, RunAlive
from harness.runtime.nats_link import NatsLink, NatsSettings, nats_errors
from harness.runtime.remote_run import RemoteRun
from harness.runtime.spec import (
    AgentControl,
    AgentSpec,
    RunIO,
    RunOutcome,
    SpareLimits,
)
from harness.runtime.wire import (
    SPARES_KEY,
    Event,
    spares_json,
)
from harness.waits import wait_set

if TYPE_CHECKING:
    from nats.aio.msg import Msg

logger = logging.getLogger(__name__)


class NatsHosting:
    def __init__(self, settings: NatsSettings, *, lost_after: float = 10.0) -> None:
        self.settings = settings
        self.lost_after = lost_after
        self._link: NatsLink | None = None
        self._connecting = asyncio.Lock()
        self._runs: set[RemoteRun] = set()
        self._telling: set[asyncio.Future[None]] = set()
        self._afterwards = Aftercare(lambda: self._link, self.link)

    def on_late_outcome(self, listener: LateListener) -> None:
        """``listener(task_slug, agent_id, outcome)`` when a run that ended ``interrupted``
        (its worker judged lost, or not found at a restart) turns out to have ended on its
        worker after all."""
        self._afterwards.on_late_outcome(listener)

    async def await_late_outcome(self, task_slug: str, agent_id: str) -> None:
        """Watches for the outcome of a run recorded interrupted that a worker may still run
        (one a restarted harness could not find): ``on_late_outcome`` listeners get it."""
        await self._afterwards.await_late_outcome(task_slug, agent_id)

    async def resume_aftercare(self, folder: Path, run_id: str | None, alive: RunAlive) -> None:
        """Keeps the kills owed to workers and the outcomes awaited from them in ``folder``
        (as the harness run ``run_id``) from now on, and takes up those a stopped harness
        left there (a run that ``alive`` says ended)."""
        await self._afterwards.resume(folder, run_id, alive)

    async def link(self) -> NatsLink:
        async with self._connecting:
            if self._link is None:
                self._link = await NatsLink.connect(
                    self.settings, name="harness orchestrator", on_reconnect=self._reconnected
                )
            return self._link

    def keep_warm(
        self,
        templates: Sequence[tuple[AgentSpec, int]],
        follow_ups: int = 0,
        *,
        limits: SpareLimits | None = None,
        busy: Callable[[], bool] | None = None,
    ) -> None:
        """Tells the workers which spares to keep: the latest word stays in a key-value
        bucket, so a worker that starts later keeps them too, within ``limits`` each. (No
        follow-up spares on workers: a task's next agent may run on another one. A worker does
        not see the orchestrator's queue: its spares do not wait on it.)"""
        task = asyncio.ensure_future(self._tell_spares(spares_json(templates, limits)))
        self._telling.add(task)
        task.add_done_callback(self._telling.discard)

    def start_ahead(self, template: AgentSpec) -> None:
        """Nothing: the agent runs on a worker, which keeps the spares the bot asks for."""

    async def _tell_spares(self, data: bytes) -> None:
        failures: tuple[type[BaseException], ...] = (HarnessError, *nats_errors())
        try:
            link = await self.link()
            bucket = await link.spares_bucket()
            await bucket.put(SPARES_KEY, data)
        except failures as exc:  # the workers start their agents cold
            logger.warning("could not tell the workers which spares to keep: %s", exc)

    async def close(self) -> None:
        await self._afterwards.close()
        if self._link is not None:
            await self._link.close()
            self._link = None

    def problem(self) -> str | None:
        """Why agents cannot reach workers now (for /readyz), or None."""
        if self._link is None or not self._link.connected:
            return f"NATS at {self.settings.url} not connected"
        return None

    async def connect(self) -> None:
        """Connects now (a HarnessError naming the URL within a few seconds when NATS is not
        there), so a front end can fail at start rather than at its first agent."""
        await self.link()

    async def run(self, spec: AgentSpec, control: AgentControl, io: RunIO) -> RunOutcome:
        return await (await self._remote_run(spec, control, io)).follow(queue=True)

    async def _remote_run(self, spec: AgentSpec, control: AgentControl, io: RunIO) -> RemoteRun:
        """A run of ``spec`` on the workers, followed through this hosting's link."""
        link, limit = await self.link(), self.lost_after
        return RemoteRun(
            link, spec, control, io, lost_after=limit, live=self._runs, afterwards=self._afterwards
        )

    @property
    def agents_outlive_harness(self) -> bool:
        return True

    async def still_running(self, agent_id: str) -> bool:
        """Whether a worker still runs the agent (a heartbeat within ``lost_after``) or ran it
        to its end (its outcome is in JetStream). A run no worker took yet is withdrawn from
        the queue, and then it is not running."""
        link = await self.link()
        s = link.subjects
        with contextlib.suppress(*nats_errors()):
            last = await link.js.get_last_msg(s.events_stream, s.events(agent_id))
            if last.data is not None and Event.decode(last.data).kind == "outcome":
                return True
        with contextlib.suppress(*nats_errors()):
            queued = await link.js.get_last_msg(s.runs_stream, s.run(agent_id))
            if queued.seq is not None and await link.js.delete_msg(s.runs_stream, queued.seq):
                return False
        heard = asyncio.Event()

        async def on_alive(msg: Msg) -> None:
            heard.set()

        sub = await link.nc.subscribe(s.alive(agent_id), cb=on_alive)
        try:
            return await wait_set(heard, min(self.lost_after, 3.0))
        finally:
            with contextlib.suppress(*nats_errors()):
                await sub.unsubscribe()

    async def adopt(
        self, spec: AgentSpec, control: AgentControl, io: RunIO, *, seen_messages: int
    ) -> RunOutcome:
        """Follows an agent a worker runs since before this process started, to its end;
        the first ``seen_messages`` journal lines were recorded already."""
        run = await self._remote_run(spec, control, io)
        run.started = True
        run.skip_messages = seen_messages
        return await run.follow(queue=False)

    async def _reconnected(self) -> None:
        # Silence while this side was cut off from NATS is not the workers' fault; and a
        # restarted server may have lost the consumers following the runs' events.
        self._afterwards.link_back()
        for run in list(self._runs):
            run.heard_now()
            await run.follow_events()
