"""One agent seen from its thread: a status message kept current at a Slack-friendly rate
(elapsed time and what the agent is doing, from ``orchestrator.agents()``), then replaced by
the rendered result through the outbox.

Each followed agent is *watched* in the ledger from the moment the bot shows it: where its
status message is and whose message gets the final reaction. The result is owed in the same
step that ends the watch, so a bot stopped at any moment settles at its next start what it
was showing: a result that arrived meanwhile, or the notice that the agent was interrupted
(with a *Run again* button).
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Collection, Coroutine, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

from bot.assistant import ThreadStatus, assistant_status
from bot.background import Background
from bot.blocks import (
    diff_file_name,
    diff_fits_inline,
    render_record,
    status_text,
    with_rerun_button,
)
from bot.late_results import asked_before, interruption_key, late_notice, place_of, rerun_buttons
from bot.memory_views import proposal_messages
from bot.outbox import Outbox, Step, StopStreamStep
from bot.plans import models_of, plan_buttons_for
from bot.poster import CALL_ERRORS, Poster, classify
from bot.pull_request_views import result_buttons_for
from bot.streaming import (
    Recipient,
    ReplyStream,
    TaskLine,
    stream_header,
    task_status,
    task_title,
    with_feedback,
)
from harness.agents.events import AgentEvent
from harness.agents.orchestrator import Orchestrator
from harness.errors import AgentNotFoundError, HarnessError
from harness.tasks.ledger import JSON, Ledger, Owed
from harness.tasks.model import FINAL_STATUSES, DispatchRecord, ThreadRef

logger = logging.getLogger(__name__)

DONE, FAILED = "white_check_mark", "x"


@dataclass(frozen=True)
class Watch:
    """What the bot needs to settle an agent it shows in a thread."""

    agent_id: str
    thread: ThreadRef
    task_slug: str
    role: str
    status_ts: str | None = None  # the status message, once posted
    reply_to: str | None = None  # ts of the person's message that gets ✅ / ❌
    drafted_by: str | None = None
    streaming: bool = False  # the status message is a stream the result closes

    def to_json(self) -> dict[str, Any]:
        return {
            "streaming": self.streaming,
            "thread": [self.thread.channel, self.thread.thread_ts],
            "taskSlug": self.task_slug,
            "role": self.role,
            "statusTs": self.status_ts,
            "replyTo": self.reply_to,
            "draftedBy": self.drafted_by,
        }

    @classmethod
    def from_json(cls, agent_id: str, data: dict[str, Any]) -> Watch:
        channel, thread_ts = data["thread"]
        return cls(
            agent_id,
            ThreadRef(str(channel), str(thread_ts)),
            str(data["taskSlug"]),
            str(data["role"]),
            status_ts=data.get("statusTs"),
            reply_to=data.get("replyTo"),
            drafted_by=data.get("draftedBy"),
            streaming=data.get("streaming") is True,
        )


def final_reaction(record: DispatchRecord) -> str:
    return DONE if record.status == "completed" else FAILED


class AgentWatcher:
    def __init__(
        self,
        orchestrator: Orchestrator,
        poster: Poster,
        ledger: Ledger,
        outbox: Outbox,
        background: Background,
        *,
        interval: float,
        streaming: bool = False,
    ) -> None:
        self.orchestrator = orchestrator
        self.background = background
        self.poster = poster
        self.ledger = ledger
        self.outbox = outbox
        self.interval = interval
        # agent id -> Slack user who stopped it with /harness kill (shown in its thread).
        self.stopped_by: dict[str, str] = {}
        self.streaming = streaming
        self.thread_status = ThreadStatus(poster.client)
        # A task's agent-session status, which its streams end with (None: no session).
        self.session_status: Callable[[str], str | None] = lambda _slug: None
        # agent id -> its live reply stream (its drafted agents show up there as task lines).
        self._streams: dict[str, ReplyStream] = {}
        self._team: str | None = None
        orchestrator.subscribe(self._on_agent_event)

    def status(self, agent_id: str, role: str, intro: str | None = None) -> str | None:
        """The status line of a live agent; None once it is no longer live."""
        info = self.orchestrator.agent(agent_id)
        if info is None:
            return None
        return status_text(
            role,
            agent_id,
            state=info.status,
            elapsed_seconds=info.elapsed_seconds,
            activity=info.activity,
            intro=intro,
        )

    async def follow(
        self,
        thread: ThreadRef,
        agent_id: str,
        role: str,
        *,
        task_slug: str,
        intro: str | None = None,
        drafted_by: str | None = None,
        reply_to: str | None = None,
        handles: str | None = None,
        recipient: str | None = None,
    ) -> DispatchRecord:
        """Shows the agent in the thread until it ends, then owes the thread its result (and
        ``reply_to`` its reaction); returns the final record. With streaming on, the agent's
        reply streams to ``recipient`` (whom a stream in a channel is for)."""
        watch = Watch(agent_id, thread, task_slug, role, reply_to=reply_to, drafted_by=drafted_by)
        # The watch takes over the request ``handles`` (a person's message) in one step.
        # A disk that refuses the watch takes it later (the backlog): the agent is shown.
        await self.outbox.backlog.write(
            partial(self.ledger.watch, agent_id, watch.to_json(), handles=handles), "watch"
        )
        shown = self.status(agent_id, role, intro)
        stream = await self._open_stream(watch, intro, recipient) if shown else None
        if stream is not None:
            ts: str | None = stream.ts
            watch = dataclasses.replace(watch, streaming=True)
        else:
            ts = await self.poster.post(thread, shown) if shown else None
        if ts is not None:
            watch = dataclasses.replace(watch, status_ts=ts)
            await self.outbox.backlog.write(
                partial(self.ledger.watch, agent_id, watch.to_json()), "watch"
            )
        try:
            return await self.follow_to_end(watch, shown, intro)
        finally:
            self._streams.pop(agent_id, None)

    async def _open_stream(
        self, watch: Watch, intro: str | None, recipient: str | None
    ) -> ReplyStream | None:
        if not self.streaming:
            return None
        team = await self._team_id() if recipient else None
        who = Recipient(recipient, team) if recipient and team else None
        stream = ReplyStream(self.poster.client, watch.thread, watch.task_slug, who)
        header = stream_header(watch.role, watch.agent_id, intro)
        if await stream.start(header) is None:
            return None
        self._streams[watch.agent_id] = stream
        return stream

    async def _team_id(self) -> str | None:
        if self._team is None:
            try:
                self._team = str((await self.poster.client.auth_test()).get("team_id") or "")
            except CALL_ERRORS as exc:
                logger.info("no team id for streams in channels: %s", classify(exc).error)
        return self._team or None

    async def follow_to_end(
        self, watch: Watch, shown: str | None = None, intro: str | None = None
    ) -> DispatchRecord:
        """Keeps the watched agent's status message (or stream, and an assistant thread's
        status line) current until it ends, then settles it."""
        agent_id, role, ts = watch.agent_id, watch.role, watch.status_ts
        stream = self._streams.get(agent_id)
        said = 0
        while True:
            try:
                record = await self.orchestrator.wait(agent_id, timeout=self.interval)
                break
            except TimeoutError:
                info = self.orchestrator.agent(agent_id)
                if info is not None and watch.drafted_by is None:
                    await self.thread_status.show(watch.thread, assistant_status(info))
                if stream is not None and not stream.over:
                    texts = self.orchestrator.agent_said(agent_id, said)
                    said += len(texts)
                    for piece in texts:
                        stream.say(piece)
                    await stream.flush()
                    continue
                text = self.status(agent_id, role, intro)
                if ts is not None and text is not None and text != shown and not watch.streaming:
                    await self.poster.update(watch.thread.channel, ts, text)
                    shown = text
        if stream is not None:  # what it said last, before the result closes the stream
            for piece in (await self.orchestrator.tasks.said(watch.task_slug, record))[said:]:
                stream.say(piece)
            await stream.flush(attempts=4)  # the last: nothing would send it later
        await self.settle(watch, record)
        if watch.drafted_by is None:
            await self.thread_status.show(watch.thread, "")
        return record

    def _on_agent_event(self, event: AgentEvent) -> Coroutine[Any, Any, None] | None:
        """A drafted agent's state, as a task line in its parent's stream; an agent
        announced as interrupted that finished after all, in its thread (the orchestrator
        waits until that is owed)."""
        record = event.record
        if event.kind == "finished_late" and event.task.thread is not None:
            watch = Watch(record.agent_id, event.task.thread, event.task.slug, record.role)
            return self._announce_late(watch, record)
        stream = self._streams.get(record.parent_id) if record.parent_id else None
        if stream is not None:
            title = task_title(record.role, record.prompt)
            stream.task(TaskLine(record.agent_id, title, task_status(record.status)))
        return None

    async def _announce_late(self, watch: Watch, record: DispatchRecord) -> None:
        """The result of an agent whose thread was told it was interrupted, once: owed in
        the step that claims it, in place of its interruption notice (withdrawn from the
        outbox while it was still unsent)."""
        withdrawn = await self.outbox.withdraw(interruption_key(record.agent_id))
        try:
            if withdrawn is not None:
                place = place_of(withdrawn.data)  # type: ignore[arg-type]
                watch = dataclasses.replace(
                    watch, status_ts=place.status_ts, streaming=place.streaming,
                    reply_to=place.reply_to,
                )  # fmt: skip
            await self.settle(watch, record, late=True, claims=f"late:{record.agent_id}",
                              replaces=withdrawn)  # fmt: skip
        finally:
            if withdrawn is not None:
                self.outbox.release(withdrawn)

    async def settle(
        self,
        watch: Watch,
        record: DispatchRecord,
        *,
        late: bool = False,
        resumed: bool = False,
        claims: str | None = None,
        replaces: Owed | None = None,
    ) -> bool:
        """Owes the thread the agent's result in place of its status message, then the
        reaction on the person's message; the watch ends in the same step. ``late``: the
        thread was told the agent was interrupted, and it finished after all. ``resumed``:
        a bot before this one may have posted it (its watch outlived a full disk), so its
        posts are looked for in the thread first. ``claims`` and ``replaces``: as
        ``Outbox.owe`` takes them; False when ``claims`` was claimed before."""
        thread = watch.thread
        diff = await self.orchestrator.tasks.diff(watch.task_slug, record)
        messages = render_record(
            record,
            task_slug=watch.task_slug,
            stopped_by=self.stopped_by.pop(record.agent_id, None),
            drafted_by=watch.drafted_by,
            diff=diff,
        )
        # A late result takes the interruption notice's place: its *Run again* button would
        # offer to run an agent that finished.
        # A withdrawn notice that was tried may have been posted, its answer lost.
        find = late and (replaces is None or replaces.attempts > 0)
        notice, asked = await self._find_notice(watch) if find else (None, None)
        reply_to = watch.reply_to or asked
        if late:
            messages = [late_notice(record), *messages]
        if record.status == "interrupted":
            models = models_of(self.orchestrator.roles, record)  # a menu to pick another
            messages = with_rerun_button(messages, record.agent_id, models)
        messages = plan_buttons_for(messages, record, self.orchestrator.roles)
        messages += proposal_messages(record, watch.task_slug)  # Keep / Discard, bot/memory.py
        if record.status == "completed" and record.diff_stat:
            task = await self.orchestrator.tasks.task(watch.task_slug)
            has_forge = self.orchestrator.pull_requests.forge_of(task) is not None
            messages = result_buttons_for(messages, record, task, has_forge)
        first, rest = messages[0], messages[1:]
        steps: list[Step] = []
        ts = watch.status_ts
        if notice is not None:
            steps.append({"op": "update", "ts": notice, "message": first})
        elif ts is not None and watch.streaming:
            closing = with_feedback(first, watch.task_slug, record.agent_id)
            stop: StopStreamStep = {"op": "stop_stream", "ts": ts, "message": closing}
            if (session := self.session_status(watch.task_slug)) is not None:
                stop["session_status"] = session
            steps.append(stop)
        elif ts is not None and self.poster.is_newest(thread, ts):
            steps.append({"op": "update", "ts": ts, "message": first})
        else:
            if ts is not None:
                steps.append({"op": "delete", "ts": ts})
            steps.append({"op": "post", "message": first})
        steps += [{"op": "post", "message": message} for message in rest]
        if diff and not diff_fits_inline(diff):
            where = f"branch {record.branch}" if record.branch else "the task's workspace"
            steps.append(
                {
                    "op": "upload",
                    "task_slug": watch.task_slug,
                    "agent_id": record.agent_id,
                    "filename": diff_file_name(watch.task_slug, record.agent_id),
                    "title": f"{record.role} {record.agent_id}: {where}",
                    "comment": f"The full diff of {where} after {record.role} `{record.agent_id}`.",
                }
            )
        if reply_to is not None:
            name = final_reaction(record)
            if late and name != FAILED:  # the interruption's ❌ goes with its notice
                steps.append({"op": "react", "channel": thread.channel, "ts": reply_to,
                              "name": FAILED, "remove": True})  # fmt: skip
            steps.append({"op": "react", "channel": thread.channel, "ts": reply_to,
                          "name": name})  # fmt: skip
        return await self.outbox.owe(
            thread,
            steps,
            agent={"task_slug": watch.task_slug, "agent_id": record.agent_id},
            settles=record.agent_id,
            key=f"{record.agent_id}.{record.status}{'.late' if late else ''}",
            recheck=resumed,
            claims=claims,
            replaces=replaces,
        )

    async def resume(
        self,
        interrupted: Sequence[tuple[str, DispatchRecord]] = (),
        only: Collection[str] | None = None,
    ) -> int:
        """At start: settles every watched agent that ended while the bot was away (a result
        that came in, or an interruption), and announces in its task's thread each agent of
        ``interrupted`` (marked so at this start) that no watch covered. How many it did.
        ``only``: the watches of these agents alone (another replica's, taken over)."""
        done = 0
        watched = set()
        for agent_id, data in await self.ledger.watches():
            if only is not None and agent_id not in only:
                continue
            watched.add(agent_id)
            try:
                watch = Watch.from_json(agent_id, data)
                record = await self.orchestrator.record(agent_id)
            except AgentNotFoundError:
                logger.warning("watched agent %s has no record: forgotten", agent_id)
                await self.outbox.backlog.write(partial(self.ledger.unwatch, agent_id), "unwatch")
                continue
            except (KeyError, TypeError, ValueError):
                logger.warning("watch of agent %s is unreadable: forgotten", agent_id)
                await self.outbox.backlog.write(partial(self.ledger.unwatch, agent_id), "unwatch")
                continue
            if watch.status_ts is None:  # stopped between posting it and noting where
                watch = dataclasses.replace(watch, status_ts=await self._find_status(watch))
            if record.status in FINAL_STATUSES:
                await self.settle(watch, record, resumed=True)
                done += 1
            elif self.orchestrator.agent(agent_id) is not None:
                # Still at work on a worker, and followed again: so is its status message.
                self.background.spawn(self.follow_to_end(watch), name=f"follow {agent_id}")
                done += 1
        unwatched = [
            (slug, record) for slug, record in interrupted if record.agent_id not in watched
        ]
        intake = await self.ledger.intake() if unwatched else []  # the requests they were for
        for slug, record in unwatched:
            if await self._announce(slug, record, intake):
                done += 1
        return done

    async def _find_status(self, watch: Watch) -> str | None:
        """The ts of the agent's status message in its thread, looked up in Slack."""
        marker = f"… agent {watch.agent_id},"
        for message in await self.poster.replies(watch.thread):
            if message.get("bot_id") and marker in str(message.get("text", "")):
                ts = message.get("ts")
                return ts if isinstance(ts, str) else None
        return None

    async def _find_notice(self, watch: Watch) -> tuple[str | None, str | None]:
        """The ts of the message in the agent's thread that offers to run it again (its
        interruption notice), looked up in Slack, and of the person's message before it that
        got its ❌; None for what is not there."""
        messages = await self.poster.replies(watch.thread)
        for at, message in enumerate(messages):
            if message.get("bot_id") and watch.agent_id in rerun_buttons(message):
                ts = message.get("ts")
                before = [m for m in messages[:at] if not m.get("bot_id")]
                asked = next((m.get("ts") for m in reversed(before) if _has_reaction(m, FAILED)),
                             None)  # fmt: skip
                return (ts if isinstance(ts, str) else None,
                        asked if isinstance(asked, str) else None)  # fmt: skip
        return None, None

    async def _announce(
        self, task_slug: str, record: DispatchRecord, intake: Sequence[tuple[str, JSON, float]]
    ) -> bool:
        """Tells the task's thread that ``record``'s agent was interrupted (once); the request
        it was started for gets its ❌ (in ``intake`` when no watch had taken it over)."""
        try:
            task = await self.orchestrator.tasks.task(task_slug)
        except HarnessError as exc:
            logger.warning("cannot announce interrupted agent %s: %s", record.agent_id, exc)
            return False
        if task.thread is None:
            return False
        asked = asked_before(intake, task.thread, record.started_at)
        watch = Watch(record.agent_id, task.thread, task_slug, record.role, reply_to=asked)
        return await self.settle(watch, record, claims=f"announced:{record.agent_id}")


def _has_reaction(message: dict[str, Any], name: str) -> bool:
    reactions = message.get("reactions")
    return isinstance(reactions, list) and any(
        isinstance(r, dict) and r.get("name") == name for r in reactions
    )
