"""``harness worker``: runs agents for a harness on another machine, over NATS.

The worker takes agent runs from the JetStream work queue (at most ``slots`` at once), runs
each on the same ``AgentHost`` as a one-machine install (the Claude Code CLI, in a folder of
its own per task under ``workspaces``), and reports back: the agent's events go to JetStream in
order, a heartbeat goes out every second while it runs, and its harness tool calls and
approval requests go to the orchestrator by request/reply. A kill request stops the agent at
once. The worker never sees the bot's Slack secrets: it has none, and its agents run with
``SLACK_*`` withheld like any other.

A run is acknowledged (taken off the queue for good) just before its agent starts, so a worker
that dies before then leaves the run to another worker, and one that dies after never has it
run twice. What a worker owes (events, the outcome, tool calls) is sent again until NATS has
it, however long NATS is away; a worker started before NATS waits for it. A worker stopped
while NATS is away keeps the events it still owes on disk, and publishes them when it starts
again (``harness/runtime/worker_reports.py``). See ``harness/runtime/wire.py`` for the
protocol.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from harness import health
from harness.clock import SYSTEM, Clock
from harness.config.settings import WorkspaceSettings
from harness.errors import HarnessError
from harness.metrics import Metrics
from harness.retry import Backoff, retrying
from harness.runtime.host import AgentHost
from harness.runtime.nats_link import NatsLink, NatsSettings, nats_errors
from harness.runtime.spec import (
    AgentControl,
    AgentRuntime,
    Approval,
    RunIO,
    RunOutcome,
    ToolReply,
    ToolUse,
)
from harness.runtime.wire import (
    SPARES_KEY,
    Event,
    RunRequest,
    ToolRequest,
    decode_answer,
    decode_approval,
    decode_reply,
    decode_spare_limits,
    decode_spares,
    outcome_json,
    tool_use_json,
)
from harness.runtime.worker_reports import OwedReports, Reporter
from harness.tasks.common import validate_slug
from harness.waits import cancel_surely, wait_set
from harness.workspaces.manager import Workspaces

if TYPE_CHECKING:
    from nats.aio.msg import Msg

logger = logging.getLogger(__name__)

T = TypeVar("T")

HEARTBEAT_SECONDS = 1.0
# The orchestrator says "working" at once, then every few seconds until a tool call is done;
# this long without a word, it is gone (restarting) and the call is sent again.
FIRST_ANSWER_SECONDS = 2.0
SILENCE_SECONDS = 15.0
DURABLE = "harness-workers"
# How long a stopping worker waits for its agents' outcomes to be stored (NATS away).
STOP_SECONDS = 5.0
# How a worker waits before trying NATS again (a silent tool call).
NATS_BACKOFF = Backoff(first=0.2, cap=5.0)
# How a worker started before NATS is there waits between tries to connect.
CONNECT_BACKOFF = Backoff(first=1.0, cap=15.0)


async def _unless_stopped(operation: Awaitable[T], stop: asyncio.Event) -> T | None:
    """``operation``'s result, or None (the operation cancelled) once ``stop`` is set."""
    work = asyncio.ensure_future(operation)
    stopped = asyncio.ensure_future(stop.wait())
    try:
        await asyncio.wait([work, stopped], return_when=asyncio.FIRST_COMPLETED)
    finally:
        stopped.cancel()
        if not work.done():
            await cancel_surely(work)
    if work.cancelled() or (stop.is_set() and work.exception() is not None):
        return None
    return work.result()


def _log_waiting(what: str) -> None:
    logger.warning("%s", what)


class RemoteTools:
    """The orchestrator's ToolGateway, reached over NATS. A call is sent again (same call id)
    whenever the orchestrator falls silent, e.g. while it restarts; nothing cuts a long
    ``await_agent`` or ``ask_human`` short as long as the orchestrator says it is working."""

    def __init__(self, link: NatsLink, clock: Clock = SYSTEM) -> None:
        self.link = link
        self.clock = clock

    async def call(self, agent_id: str, tool: str, args: Any) -> ToolReply:
        data = await self._request(agent_id, ToolRequest("call", tool, args, self.clock.token(16)))
        return decode_reply(data)

    async def approve(self, agent_id: str, tool: str, args: Any) -> Approval:
        request = ToolRequest("approve", tool, args, self.clock.token(16))
        return decode_approval(await self._request(agent_id, request))

    async def _request(self, agent_id: str, request: ToolRequest) -> bytes:
        from nats.errors import TimeoutError as NatsTimeout

        nc = self.link.nc
        inbox = nc.new_inbox()
        answers = await nc.subscribe(inbox)

        async def ask() -> bytes:
            await nc.publish(self.link.subjects.tools(agent_id), request.encode(), inbox)
            wait = FIRST_ANSWER_SECONDS
            while True:
                msg = await answers.next_msg(timeout=wait)
                answer = decode_answer(msg.data)
                if answer is not None:
                    return answer
                wait = SILENCE_SECONDS

        def silent(_exc: BaseException, _delay: float) -> None:
            logger.info("agent %s: the harness is silent; asking again", agent_id)

        try:
            # No limit on tries: the agent waits on this answer while the orchestrator is away.
            return await retrying(
                ask, retry_on=(NatsTimeout, TimeoutError), backoff=NATS_BACKOFF, on_retry=silent
            )
        finally:
            with contextlib.suppress(*nats_errors()):
                await answers.unsubscribe()


class Worker:
    def __init__(
        self,
        settings: NatsSettings,
        runtime: AgentRuntime,
        *,
        name: str,
        slots: int,
        workspaces: Path,
        health_port: int | None = None,
    ) -> None:
        self.settings = settings
        self.runtime = runtime
        self.name = name
        self.slots = slots
        self.workspaces = workspaces
        self._runs: dict[str, asyncio.Task[None]] = {}
        # The agents' run is this worker: the orchestrator's run id means nothing here, and
        # its restart must not sweep the agents away.
        self.host = AgentHost(
            runtime, Workspaces(WorkspaceSettings(root=workspaces)), run_id=f"worker-{name}"
        )
        self._controls: dict[str, AgentControl] = {}
        # What NATS did not take of a run before this worker stopped, kept for its next start.
        self._owed = OwedReports(workspaces, name)
        self._unsent: dict[str, list[Event]] = {}
        # /healthz, /readyz (NATS connected) and /metrics on this port (None: not served; 0:
        # any free one, known once served as ``health_port``).
        self.health_port = health_port
        self._roles: dict[str, str] = {}  # role of each agent running here
        self.metrics = Metrics()
        self.metrics.watch_agents(lambda: [(role, False) for role in self._roles.values()])
        self.link: NatsLink | None = None

    async def serve(
        self,
        stop: asyncio.Event,
        ready: Callable[[], None] = lambda: None,
        waiting: Callable[[str], None] | None = None,
    ) -> None:
        """Takes and runs agents until ``stop`` is set (calling ``ready`` once it takes
        them); then stops the agents it runs. NATS not there yet is waited for, trying again
        with backoff and telling ``waiting`` each time why and for how long (a warning in
        the log by default); ``stop`` set while connecting or while NATS is away ends it
        promptly."""
        runner = None
        if self.health_port is not None:
            checks = {"nats": self._nats_problem}
            runner = await health.serve(self.metrics, checks, port=self.health_port)
            self.health_port = health.bound_port(runner)
        try:
            await self._serve(stop, ready, waiting or _log_waiting)
        finally:
            if runner is not None:
                await runner.cleanup()

    async def _nats_problem(self) -> str | None:
        if self.link is None or not self.link.connected:
            return f"not connected to {self.settings.url}"
        return None

    async def _connect(self, waiting: Callable[[str], None]) -> NatsLink:
        """The link to NATS, tried again and again (with backoff) until it is made: a worker
        may well start before NATS does."""

        def not_yet(exc: BaseException, delay: float) -> None:
            why = exc.message if isinstance(exc, HarnessError) else str(exc)
            waiting(f"waiting for NATS at {self.settings.url} ({why}); trying again in {delay:g} s")

        return await retrying(
            lambda: NatsLink.connect(self.settings, name=f"harness worker {self.name}"),
            retry_on=HarnessError,
            backoff=CONNECT_BACKOFF,
            on_retry=not_yet,
        )

    async def _serve(
        self, stop: asyncio.Event, ready: Callable[[], None], waiting: Callable[[str], None]
    ) -> None:
        link = await _unless_stopped(self._connect(waiting), stop)
        if link is None:
            return
        self.link = link
        free = asyncio.Semaphore(self.slots)
        spares: asyncio.Task[None] | None = None
        owed = asyncio.get_running_loop().create_task(self._owed.publish_all(link))
        try:
            from nats.js.api import AckPolicy, ConsumerConfig

            config = ConsumerConfig(
                durable_name=DURABLE, ack_policy=AckPolicy.EXPLICIT, ack_wait=30
            )
            queue = await link.js.pull_subscribe(
                link.subjects.all_runs, durable=DURABLE, stream=link.subjects.runs_stream,
                config=config,
            )  # fmt: skip
            logger.info("worker %s: taking agents from %s (%d slots)", self.name,
                        self.settings.url, self.slots)  # fmt: skip
            ready()
            spares = asyncio.get_running_loop().create_task(self._keep_spares(link))
            while not stop.is_set():
                if await _unless_stopped(free.acquire(), stop) is None:
                    break
                msg = await self._next_run(queue, stop)
                if msg is None:
                    free.release()
                    continue
                task = asyncio.get_running_loop().create_task(self._serve_run(link, msg))
                task.add_done_callback(lambda _: free.release())
        finally:
            for control in list(self._controls.values()):
                await control.kill(f"the worker {self.name} stopped")
            runs = list(self._runs.values())
            if runs:  # their outcomes go out unless NATS stays away
                _, late = await asyncio.wait(runs, timeout=STOP_SECONDS)
                for task in late:
                    logger.warning("worker %s: an agent's outcome could not be stored in "
                                   "%g s; stopping anyway", self.name, STOP_SECONDS)  # fmt: skip
                    task.cancel()
                await asyncio.gather(*runs, return_exceptions=True)
            for agent_id, events in self._unsent.items():
                await self._owed.keep(agent_id, events)
            await cancel_surely(owed)  # what it did not publish stays kept
            if spares is not None:
                await cancel_surely(spares)
            await self.host.close()  # its spares end with it
            await link.close()

    async def _keep_spares(self, link: NatsLink) -> None:
        """Keeps the spares the orchestrator asks for (the latest word in the bucket, and
        each new one), for as long as the worker serves."""
        try:
            bucket = await link.spares_bucket()
            watcher = await bucket.watch(SPARES_KEY)
            async for entry in watcher:
                if entry is not None and entry.value:
                    plan = entry.value  # the templates, and the caps on their idle spares
                    self.host.keep_warm(decode_spares(plan), limits=decode_spare_limits(plan))
        except nats_errors() as exc:  # its agents start cold
            logger.warning("worker %s keeps no spares: %s", self.name, exc)

    async def _next_run(self, queue: Any, stop: asyncio.Event) -> Msg | None:
        from nats.errors import TimeoutError as NatsTimeout

        try:
            [msg] = await queue.fetch(1, timeout=1.0)
        except (NatsTimeout, TimeoutError):
            return None
        except nats_errors() as exc:  # NATS away for now: try again in a moment
            logger.debug("worker %s: cannot take runs now: %s", self.name, exc)
            await wait_set(stop, 0.5)
            return None
        if stop.is_set():
            await msg.nak()
            return None
        return msg  # type: ignore[no-any-return]

    async def _serve_run(self, link: NatsLink, msg: Msg) -> None:
        try:
            request = RunRequest.decode(msg.data)
            validate_slug(request.task_slug)
        except (ValueError, KeyError, TypeError) as exc:
            logger.error("worker %s: dropped a run it cannot read: %s", self.name, exc)
            await msg.term()
            return
        spec = request.spec
        agent_id = spec.agent_id
        control = AgentControl()
        control.worker = self.name

        async def on_kill(kill: Msg) -> None:
            await control.kill(kill.data.decode("utf-8", "replace") or "killed")
            await kill.respond(b"{}")

        kills = await link.nc.subscribe(link.subjects.kill(agent_id), cb=on_kill)
        reporter = Reporter(link, agent_id, self.name)
        beat = asyncio.get_running_loop().create_task(self._heartbeat(link, agent_id))
        self._controls[agent_id] = control
        self._roles[agent_id] = spec.role.name
        # The task serving the run: a stopping worker waits for it (its outcome stored), within
        # a bound.
        self._runs[agent_id] = asyncio.current_task()  # type: ignore[assignment]
        try:
            try:
                # Taken for good, and said so, before the workspace is made (a clone may take
                # a while): from now on silence means this worker is lost.
                await msg.ack()
                reporter.report("started", {})
                logger.info("worker %s: agent %s (%s) started", self.name, agent_id, spec.role.name)

                async def on_tool_use(use: ToolUse) -> None:
                    reporter.report("tool_use", tool_use_json(use))

                io = RunIO(
                    RemoteTools(link),
                    lambda message: reporter.report("message", message),
                    on_tool_use,
                    lambda cwd: reporter.report("placed", {"cwd": cwd}),
                )
                outcome = await self.host.run(spec, control, io)
            except Exception as exc:  # the top of a remote agent's life: the outcome goes out
                logger.exception("worker %s: agent %s failed in the worker", self.name, agent_id)
                outcome = RunOutcome(status="failed", error=f"internal worker error: {exc}")
            finally:
                self._controls.pop(agent_id, None)
                self._roles.pop(agent_id, None)
            self.metrics.agent_ended(
                spec.role.name, outcome.status, outcome.duration_ms, outcome.cost_usd
            )
            reporter.report("outcome", outcome_json(outcome))
            # Said before NATS has it: an operator sees the agent ended, whatever NATS does.
            logger.info("worker %s: agent %s %s", self.name, agent_id, outcome.status)
            await reporter.close()
        finally:
            self._runs.pop(agent_id, None)
            unsent = reporter.abandon()  # none once closed; else (cancelled) kept on disk
            if unsent:
                self._unsent[agent_id] = unsent
            beat.cancel()
            with contextlib.suppress(*nats_errors()):
                await kills.unsubscribe()

    async def _heartbeat(self, link: NatsLink, agent_id: str) -> None:
        subject = link.subjects.alive(agent_id)
        while True:
            with contextlib.suppress(*nats_errors()):  # a missed beat is what the other side sees
                await link.nc.publish(subject, b"")
            await asyncio.sleep(HEARTBEAT_SECONDS)
