"""An ``AgentRuntime`` whose agents run on ``harness worker`` processes, over NATS.

``run`` puts the agent on the JetStream work queue, serves its harness tool calls and
approval requests (request/reply on ``<p>.tools.<agent>``, answered by the orchestrator's
ToolGateway, with no timeout: ``await_agent`` and ``ask_human`` may take hours), follows its
events in order (journal lines, tool use, the outcome) and returns the outcome the worker
reports. The orchestrator does not know the difference: its concurrency cap, records and
audit stay as they are. See ``harness/remote.py`` for the protocol.

A worker that goes silent (no event and no heartbeat for ``lost_after`` seconds) is lost: the
run ends ``interrupted`` and is not run again (an agent's side effects and cost are not
repeated behind anyone's back).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import TYPE_CHECKING, Any

from harness.agent_spec import (
    AgentControl,
    AgentSpec,
    MessageSink,
    RunOutcome,
    ToolGateway,
    ToolReply,
    ToolUseSink,
)
from harness.errors import HarnessError
from harness.nats_link import NatsLink, NatsSettings, nats_errors
from harness.remote import (
    Event,
    RunRequest,
    ToolRequest,
    encode_approval,
    encode_reply,
    outcome_from_json,
    tool_use_from_json,
)

if TYPE_CHECKING:
    from nats.aio.msg import Msg

logger = logging.getLogger(__name__)

KILL_TIMEOUT = 2.0  # a worker answers a kill request within milliseconds


class NatsRuntime:
    def __init__(self, settings: NatsSettings, *, lost_after: float = 10.0) -> None:
        self.settings = settings
        self.lost_after = lost_after
        self._link: NatsLink | None = None
        self._connecting = asyncio.Lock()

    async def link(self) -> NatsLink:
        async with self._connecting:
            if self._link is None:
                self._link = await NatsLink.connect(self.settings, name="harness orchestrator")
            return self._link

    async def close(self) -> None:
        if self._link is not None:
            await self._link.close()
            self._link = None

    async def run(
        self,
        spec: AgentSpec,
        control: AgentControl,
        *,
        tools: ToolGateway,
        on_message: MessageSink,
        on_tool_use: ToolUseSink,
    ) -> RunOutcome:
        link = await self.link()
        run = _RemoteRun(link, spec, control, tools, on_message, on_tool_use, self.lost_after)
        return await run.follow()


class _RemoteRun:
    """One agent run on a worker, seen from the orchestrator."""

    def __init__(
        self,
        link: NatsLink,
        spec: AgentSpec,
        control: AgentControl,
        tools: ToolGateway,
        on_message: MessageSink,
        on_tool_use: ToolUseSink,
        lost_after: float,
    ) -> None:
        self.link = link
        self.spec = spec
        self.control = control
        self.tools = tools
        self.on_message = on_message
        self.on_tool_use = on_tool_use
        self.lost_after = lost_after
        self.agent_id = spec.agent_id
        self._events: asyncio.Queue[Event] = asyncio.Queue()
        self._heard = asyncio.get_running_loop().time()
        self._started = False
        self._queued_seq: int | None = None  # the run request's place in the work queue
        self._calls: set[asyncio.Task[None]] = set()

    async def follow(self) -> RunOutcome:
        nc, js, s = self.link.nc, self.link.js, self.link.subjects
        subscriptions: list[Any] = [
            await nc.subscribe(s.tools(self.agent_id), cb=self._on_tool_request),
            await nc.subscribe(s.alive(self.agent_id), cb=self._on_alive),
            await js.subscribe(s.events(self.agent_id), ordered_consumer=True, cb=self._on_event),
        ]
        self.control.attach(self._kill)
        try:
            request = RunRequest(self.spec, self.spec.task_slug)
            ack = await js.publish(s.runs, request.encode(), headers={"Nats-Msg-Id": self.agent_id})
            self._queued_seq = ack.seq
            return await self._outcome()
        finally:
            self.control.attach(None)
            for sub in subscriptions:
                with contextlib.suppress(*nats_errors()):  # the connection may be gone
                    await sub.unsubscribe()
            for call in list(self._calls):
                call.cancel()
            await asyncio.gather(*self._calls, return_exceptions=True)

    async def _outcome(self) -> RunOutcome:
        last_seq = 0
        loop = asyncio.get_running_loop()
        while True:
            try:
                event = await asyncio.wait_for(self._events.get(), timeout=1.0)
            except TimeoutError:
                silent = loop.time() - self._heard
                if self._started and silent > self.lost_after:
                    worker = self.control.worker or "the worker"
                    return RunOutcome(
                        status="interrupted",
                        error=f"{worker} was lost: no word from it for {silent:.0f} s; the "
                        "agent is not run again by itself (ask again to run it anew)",
                    )
                continue
            if event.seq <= last_seq:  # delivered again: handled once
                continue
            last_seq = event.seq
            self._heard = loop.time()
            if event.kind == "started":
                self._started = True
                self.control.worker = event.worker
            elif event.kind == "message":
                self.on_message(dict(event.data))
            elif event.kind == "tool_use":
                await self.on_tool_use(tool_use_from_json(event.data))
            else:
                return outcome_from_json(event.data)

    # -- callbacks from NATS -----------------------------------------------------------------

    async def _on_event(self, msg: Msg) -> None:
        try:
            self._events.put_nowait(Event.decode(msg.data))
        except (ValueError, KeyError, TypeError) as exc:
            logger.warning("agent %s: unreadable event skipped: %s", self.agent_id, exc)

    async def _on_alive(self, msg: Msg) -> None:
        self._heard = asyncio.get_running_loop().time()

    async def _on_tool_request(self, msg: Msg) -> None:
        # Each call in its own task: an await_agent must not hold up the agent's other calls.
        task = asyncio.get_running_loop().create_task(self._answer(msg))
        self._calls.add(task)
        task.add_done_callback(self._calls.discard)

    async def _answer(self, msg: Msg) -> None:
        self._heard = asyncio.get_running_loop().time()
        try:
            request = ToolRequest.decode(msg.data)
        except (ValueError, KeyError, TypeError) as exc:
            reply = ToolReply({"error": "bad_request", "message": str(exc)}, is_error=True)
            await msg.respond(encode_reply(reply))
            return
        if request.kind == "approve":
            approval = await self.tools.approve(self.agent_id, request.tool, request.args)
            await msg.respond(encode_approval(approval))
        else:
            reply = await self.tools.call(self.agent_id, request.tool, request.args)
            await msg.respond(encode_reply(reply))

    async def _kill(self) -> None:
        """Takes the run off the queue when no worker has it yet; else asks its worker."""
        link, reason = self.link, self.control.kill_reason or "killed"
        if not self._started and self._queued_seq is not None:
            with contextlib.suppress(*nats_errors()):  # taken by a worker meanwhile
                if await link.js.delete_msg(link.subjects.runs_stream, self._queued_seq):
                    outcome = {"status": "killed", "error": reason}
                    self._events.put_nowait(Event(1 << 62, "outcome", "", outcome))
                    return
        try:
            await link.nc.request(
                link.subjects.kill(self.agent_id), reason.encode("utf-8"), timeout=KILL_TIMEOUT
            )
        except nats_errors() as exc:  # no responder, a timeout: the worker may be gone
            raise HarnessError(
                f"could not reach the worker of agent {self.agent_id}: {exc}",
                fix="check that the worker is running; a lost worker ends the agent by itself",
            ) from exc
