"""One agent run on a worker, followed from the harness over NATS: its run request queued, its
events in order, its tool calls and approvals answered, a kill sent, and its outcome (or
its loss when the worker goes silent). ``NatsHosting`` makes one per run it starts or adopts.

Only a worker known gone is lost: one silent for ``lost_after`` seconds while this side is
connected. While this side is cut off from NATS, however long, nothing is known of the worker:
the run is followed on, and its outcome, stored by the worker in JetStream meanwhile, comes in
when the link is back. What outlives the run goes to its hosting (``Afterwards``): a kill the
worker could not be told yet, delivered when it can be; a run judged lost, whose outcome may
still come in late.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from harness.retry import Backoff, retrying
from harness.runtime.nats_link import NatsLink, nats_errors
from harness.runtime.spec import AgentControl, AgentSpec, RunIO, RunOutcome, ToolReply
from harness.runtime.wire import (
    WORKING,
    Event,
    RunRequest,
    ToolRequest,
    encode_approval,
    encode_done,
    encode_reply,
    outcome_from_json,
    tool_use_from_json,
)
from harness.waits import cancel_surely, within

if TYPE_CHECKING:
    from nats.aio.msg import Msg

logger = logging.getLogger(__name__)

NATS_BACKOFF = Backoff(first=0.2, cap=2.0)  # between tries to follow a run's events
KILL_TIMEOUT = 2.0  # a worker answers a kill request within milliseconds
PING_SECONDS = 3.0  # "working" to a waiting worker this often while a tool call runs


def too_large(size: int, nc: Any) -> str:
    mb = 1024 * 1024
    return (
        f"its run request ({size / mb:.1f} MB with the files attached to it) is over the NATS "
        f"server's max_payload ({nc.max_payload / mb:.1f} MB): attach smaller files, or raise "
        "max_payload in the server's configuration (up to 64 MB)"
    )


class Afterwards(Protocol):
    """What outlives one followed run, kept by its hosting."""

    async def owe_kill(self, task_slug: str, agent_id: str, reason: str) -> None:
        """Delivers the kill to the agent's worker once it can be (kept until acked)."""
        ...

    async def await_late_outcome(self, task_slug: str, agent_id: str) -> None:
        """Watches for the outcome of a run judged lost, which its worker may still store."""
        ...


@dataclass
class ToolCall:
    """A tool call being answered: where to send the answer, and the answer once known."""

    reply_to: str
    answer: bytes | None = None
    tasks: list[asyncio.Task[None]] = field(default_factory=list)


class RemoteRun:
    """One agent run on a worker, seen from the orchestrator."""

    def __init__(
        self,
        link: NatsLink,
        spec: AgentSpec,
        control: AgentControl,
        io: RunIO,
        *,
        lost_after: float,
        live: set[RemoteRun],
        afterwards: Afterwards,
    ) -> None:
        self.link = link
        self.afterwards = afterwards
        self.spec = spec
        self.control = control
        self.io = io
        self.lost_after = lost_after
        self._live = live  # the hosting's runs being followed: this one while it is
        self.agent_id = spec.agent_id
        self.started = False
        self.skip_messages = 0
        self._events: asyncio.Queue[Event] = asyncio.Queue()
        self._heard = asyncio.get_running_loop().time()
        self._queued_seq: int | None = None  # the run request's place in the work queue
        self._calls: dict[str, ToolCall] = {}
        self._event_sub: Any = None  # None until subscribed (and while resubscribing)
        self._follower: asyncio.Task[None] | None = None
        self._ended = False

    def heard_now(self) -> None:
        self._heard = asyncio.get_running_loop().time()

    async def follow(self, *, queue: bool) -> RunOutcome:
        nc, js, s = self.link.nc, self.link.js, self.link.subjects
        subscriptions: list[Any] = [
            await nc.subscribe(s.tools(self.agent_id), cb=self._on_tool_request),
            await nc.subscribe(s.alive(self.agent_id), cb=self._on_alive),
        ]
        await self.follow_events()
        self.control.attach(self._kill)
        self._live.add(self)
        try:
            if queue:
                request = RunRequest(self.spec, self.spec.task_slug).encode()
                if len(request) > nc.max_payload:  # attached files travel in the request
                    return RunOutcome(status="failed", error=too_large(len(request), nc))
                ack = await js.publish(
                    s.run(self.agent_id), request, headers={"Nats-Msg-Id": self.agent_id}
                )
                self._queued_seq = ack.seq
            return await self._outcome()
        finally:
            self._ended = True
            self._live.discard(self)
            self.control.attach(None)
            if self._follower is not None:
                await cancel_surely(self._follower)
            for sub in [*subscriptions, self._event_sub]:
                if sub is None:  # never made (NATS was away when it was tried)
                    continue
                with contextlib.suppress(*nats_errors()):  # the connection may be gone
                    await sub.unsubscribe()
            tasks = [task for call in self._calls.values() for task in call.tasks]
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

    async def follow_events(self) -> None:
        """(Re)subscribes to the run's events from its first (those seen are skipped by their
        sequence number): at once when NATS lets it, else again and again in the background
        until it does or the run ends (a restarted server may take a moment to serve
        JetStream)."""
        if self._follower is not None:
            await cancel_surely(self._follower)
            self._follower = None
        try:
            await self._subscribe_events()
        except nats_errors() as exc:
            self._not_followed_yet(exc)
            if not self._ended:
                self._follower = asyncio.get_running_loop().create_task(self._keep_subscribing())

    async def _keep_subscribing(self) -> None:
        """Subscribes, after the failure ``follow_events`` met, until NATS lets it or the run
        ends."""

        async def subscribe() -> None:
            if not self._ended:
                await self._subscribe_events()

        await retrying(
            subscribe,
            retry_on=nats_errors(),
            backoff=NATS_BACKOFF,
            already_failed=1,
            on_retry=lambda exc, _delay: self._not_followed_yet(exc),
        )

    def _not_followed_yet(self, exc: BaseException) -> None:
        # Tried again; the events wait in JetStream meanwhile.
        logger.info("agent %s: cannot follow its events yet: %s", self.agent_id, exc)

    async def _subscribe_events(self) -> None:
        """Subscribes to the run's events; NATS's refusal is raised."""
        old, self._event_sub = self._event_sub, None
        if old is not None:
            with contextlib.suppress(*nats_errors()):
                await old.unsubscribe()
        subject = self.link.subjects.events(self.agent_id)
        sub = await self.link.js.subscribe(subject, ordered_consumer=True, cb=self._on_event)
        if self._ended:  # the run ended meanwhile (a reconnection raced its end)
            with contextlib.suppress(*nats_errors()):
                await sub.unsubscribe()
        else:
            self._event_sub = sub

    async def _outcome(self) -> RunOutcome:
        last_seq = 0
        messages = 0
        while True:
            try:
                event = await within(self._events.get(), 1.0)
            except TimeoutError:
                lost = await self._lost() if self.started else None
                if lost is not None:
                    return lost
                continue
            if event.seq <= last_seq:  # delivered again: handled once
                continue
            last_seq = event.seq
            self.heard_now()
            if event.kind == "started":
                self.started = True
                self.control.worker = event.worker
            elif event.kind == "placed":
                self.io.on_placed(str(event.data.get("cwd", "")))
            elif event.kind == "message":
                messages += 1
                if messages > self.skip_messages:  # recorded before a restart otherwise
                    self.io.on_message(dict(event.data))
            elif event.kind == "tool_use":
                await self.io.on_tool_use(tool_use_from_json(event.data))
            else:
                return outcome_from_json(event.data)

    async def _lost(self) -> RunOutcome | None:
        """The outcome of a run whose worker is known gone: this side connected for longer
        than ``lost_after`` and hearing nothing from it all that time (the clock starts again
        at each reconnection); None while it may still be heard. This side cut off from NATS
        says nothing of the worker, however long: the run is followed on."""
        lost_after, link = self.lost_after, self.link
        if not link.connected:
            return None
        up_since = link.up_since if link.up_since is not None else self._heard
        silent = asyncio.get_running_loop().time() - max(self._heard, up_since)
        if silent <= lost_after:
            return None
        stored = await link.stored_outcome(self.agent_id)  # reported while nobody listened
        if stored is not None:
            return stored
        if not link.connected:  # cut off while asking: judged once it is back
            return None
        worker = self.control.worker or "the worker"
        await self.afterwards.await_late_outcome(self.spec.task_slug, self.agent_id)
        return RunOutcome(
            status="interrupted",
            error=f"{worker} was lost: no word from it for {silent:.0f} s; the "
            "agent is not run again by itself (ask again to run it anew); should its "
            "result come in after all, it takes this notice's place",
        )

    # -- callbacks from NATS -----------------------------------------------------------------

    async def _on_event(self, msg: Msg) -> None:
        try:
            self._events.put_nowait(Event.decode(msg.data))
        except (ValueError, KeyError, TypeError) as exc:
            logger.warning("agent %s: unreadable event skipped: %s", self.agent_id, exc)

    async def _on_alive(self, msg: Msg) -> None:
        self.heard_now()

    async def _on_tool_request(self, msg: Msg) -> None:
        self.heard_now()
        if not msg.reply:
            return
        try:
            request = ToolRequest.decode(msg.data)
        except (ValueError, KeyError, TypeError) as exc:
            reply = ToolReply({"error": "bad_request", "message": str(exc)}, is_error=True)
            await self._send(msg.reply, encode_done(encode_reply(reply)))
            return
        call = self._calls.get(request.call_id) if request.call_id else None
        if call is not None:  # sent again: answer where the worker listens now
            call.reply_to = msg.reply
            await self._send(msg.reply, WORKING if call.answer is None else call.answer)
            return
        call = ToolCall(msg.reply)
        if request.call_id:
            self._calls[request.call_id] = call
        else:
            self._calls[f"anonymous-{id(call)}"] = call
        await self._send(call.reply_to, WORKING)
        loop = asyncio.get_running_loop()
        call.tasks += [loop.create_task(self._answer(call, request)), loop.create_task(
            self._keep_pinging(call))]  # fmt: skip

    async def _answer(self, call: ToolCall, request: ToolRequest) -> None:
        if request.kind == "approve":
            approval = await self.io.tools.approve(self.agent_id, request.tool, request.args)
            answer = encode_done(encode_approval(approval))
        else:
            reply = await self.io.tools.call(self.agent_id, request.tool, request.args)
            answer = encode_done(encode_reply(reply))
        call.answer = answer
        await self._send(call.reply_to, answer)

    async def _keep_pinging(self, call: ToolCall) -> None:
        while call.answer is None:
            await asyncio.sleep(PING_SECONDS)
            if call.answer is None:
                await self._send(call.reply_to, WORKING)

    async def _send(self, subject: str, data: bytes) -> None:
        with contextlib.suppress(*nats_errors()):  # the worker asks again when it hears nothing
            await self.link.nc.publish(subject, data)

    async def _kill(self) -> None:
        """Takes the run off the queue when no worker has it yet; else asks its worker. A
        worker that cannot be told now (this side or it cut off from NATS) is told when it
        can be: the kill is kept until then, and the run is not followed further."""
        link, reason = self.link, self.control.kill_reason or "killed"
        if not link.connected:
            await self._killed_untold(reason, "this side is cut off from NATS")
            return
        if not self.started and self._queued_seq is not None:
            with contextlib.suppress(*nats_errors()):  # taken by a worker meanwhile
                if await link.js.delete_msg(link.subjects.runs_stream, self._queued_seq):
                    outcome = {"status": "killed", "error": reason}
                    self._events.put_nowait(Event(1 << 62, "outcome", "", outcome))
                    return
        try:
            await link.nc.request(
                link.subjects.kill(self.agent_id), reason.encode("utf-8"), timeout=KILL_TIMEOUT
            )
        except nats_errors() as exc:  # no responder, a timeout: the worker is cut off or gone
            logger.warning("agent %s: its worker cannot be told to stop it now: %s",
                           self.agent_id, exc)  # fmt: skip
            await self._killed_untold(reason, "it does not answer")

    async def _killed_untold(self, reason: str, why: str) -> None:
        # Kept (past a restart of this process) before the run is said to be killed.
        await self.afterwards.owe_kill(self.spec.task_slug, self.agent_id, reason)
        note = f"its worker could not be told yet: {why}; it is told when the link is back"
        outcome = {"status": "killed", "error": f"{reason} ({note})"}
        self._events.put_nowait(Event(1 << 62, "outcome", "", outcome))
