"""Slack's agent sessions: one per task thread, with the native Stop button.

A thread's session is made when its task's first agent is queued (titled from the request,
on the creating ``agents.sessions.setStatus``), and its status follows the task: *processing*
while any of its agents runs or waits in the queue, *suspended* while one waits for a person
(a question, an approval), *active* once it is idle after a result, *closed* when its task is
gone. Statuses of one thread are sent one at a time, the latest winning.

Stop (the ``agent_session_stopped`` event) stops the task's running and queued agents, on the
terms of ``/harness kill``: the core decides (the task's requester or an admin); anyone else
is told why not, and nothing stops. The thread says who stopped them, and the session leaves
*processing* as they end.

Where Slack refuses sessions (the app is not declared an agent), the bot says once in its log
how to enable them and goes on with the assistant status line alone.

Task removal (``harness rm``, ``harness prune-tasks``) happens in another process and the
harness has no task-deleted event: a session is closed when the bot next finds its task gone
(a Stop pressed in its thread).
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from slack_sdk.web.async_client import AsyncWebClient

from bot.background import Background
from bot.blocks import escape, excerpt, mention
from bot.poster import CALL_ERRORS, Poster, classify
from bot.progress import AgentWatcher
from bot.questions import SlackHumanChannel
from harness.agents.events import AgentEvent
from harness.agents.orchestrator import Orchestrator
from harness.agents.pool import AgentInfo
from harness.errors import HarnessError, NotAllowedError
from harness.metrics import Metrics
from harness.tasks.model import DispatchRecord, Task, ThreadRef

logger = logging.getLogger(__name__)

SessionStatus = Literal["processing", "active", "suspended", "closed"]
STOP_EVENT = "agent_session_stopped"
TITLE_LIMIT = 200
UNSUBSCRIBED = "missing_agent_session_stopped_event_subscription"
# What Slack answers an app that is not declared an agent (or lacks what sessions need).
NOT_AN_AGENT = frozenset(
    {
        "not_allowed",
        "not_allowed_token_type",
        "missing_scope",
        "unknown_method",
        "no_permission",
        "invalid_app",
        "app_not_agent",
        "feature_not_enabled",
    }
)
ENABLE_HINT = (
    "agent sessions are off (Slack answered agents.sessions.setStatus with %s): threads keep "
    "the assistant status line. To get sessions and their Stop button, declare the app an "
    "agent (features.agent_view in manifest.yml, or Agents & AI Apps in the app's settings), "
    "subscribe it to the agent_session_stopped event, and reinstall it"
)
SUBSCRIBE_HINT = (
    "Slack shows no Stop button on agent sessions (setStatus warned %s): subscribe the app to "
    "the agent_session_stopped event (manifest.yml does) and reinstall it; until then people "
    "see a spinner they cannot stop"
)
NOTHING_TO_STOP = "Nothing is running in this thread, so there was nothing to stop."
NO_TASK = "This thread has no task of mine, so there was nothing to stop."
# Bot replicas: the agent's process stopped and no live one has taken its agents over yet
# (that takes seconds); saying "nothing is running" would be untrue.
HELD_BY_A_STOPPED_REPLICA = (
    "This thread's agent was started by a bot process that stopped, and is being taken "
    "over by another: press Stop again in a few seconds."
)


# ------------------------------------------------------------------ pure parts


@dataclass(frozen=True)
class TaskThread:
    """What a session needs of its task: its thread, the request and who asked."""

    thread: ThreadRef
    request: str
    requester: str | None


def session_status(live: Sequence[AgentInfo], waits_for_a_person: bool) -> SessionStatus:
    """A task's session status from its live agents and whether one waits for a person."""
    if waits_for_a_person:
        return "suspended"
    return "processing" if live else "active"


def session_title(description: str) -> str:
    """The session's title: the request, on one line, within Slack's limit."""
    return excerpt(description, TITLE_LIMIT) or "harness task"


def warnings_of(response: Mapping[str, Any]) -> set[str]:
    """The warnings of an ``ok`` answer: ``warning`` (comma separated) and
    ``response_metadata.warnings``."""
    found = {w.strip() for w in str(response.get("warning") or "").split(",") if w.strip()}
    metadata = response.get("response_metadata")
    if isinstance(metadata, Mapping):
        found |= {str(w) for w in metadata.get("warnings") or [] if w}
    return found


def stop_refusal(refused: NotAllowedError) -> str:
    """What someone whose Stop the core refused is told (the core decided who may)."""
    requester = refused.requester
    who = f"the person who asked for it ({mention(requester)})" if requester else "nobody"
    return f"You can't stop this thread's agents: only {who} and the bot's admins can."


async def stop_agent(
    orchestrator: Orchestrator, watcher: AgentWatcher, agent_id: str, reason: str, user: str
) -> NotAllowedError | None:
    """Asks the core to stop ``agent_id`` for ``user``: the core's refusal (only it decides
    who may stop, and it refuses before it stops anything), or None once asked. The agent's
    thread says who stopped it: marked before, for the agent may end before the core
    returns; the mark is taken back when refused."""
    before = watcher.stopped_by.get(agent_id)
    watcher.stopped_by[agent_id] = user
    try:
        await orchestrator.kill(agent_id, reason, by=user)
    except NotAllowedError as refused:
        if before is None:
            watcher.stopped_by.pop(agent_id, None)
        else:
            watcher.stopped_by[agent_id] = before
        return refused
    return None


def stop_notice(user: str, agents: Sequence[AgentInfo]) -> str:
    """What the thread says when someone's Stop ends its agents."""
    named = ", ".join(f"{escape(a.role)} `{escape(a.agent_id)}`" for a in agents)
    return f"⏹️ {mention(user)} pressed Stop: stopping {named}."


# ------------------------------------------------------------------ the sessions


class AgentSessions:
    def __init__(
        self,
        client: AsyncWebClient,
        orchestrator: Orchestrator,
        poster: Poster,
        watcher: AgentWatcher,
        background: Background,
        metrics: Metrics,
    ) -> None:
        self.client = client
        self.metrics = metrics
        self.orchestrator = orchestrator
        self.poster = poster
        self.watcher = watcher
        self.background = background
        self.enabled = True  # False once Slack said the app is not an agent
        self._warned = False
        self._tasks: dict[str, TaskThread] = {}  # task slug -> its thread
        self._shown: dict[ThreadRef, SessionStatus] = {}  # what Slack was last told
        self._refused: set[ThreadRef] = set()  # threads where Slack refuses a session
        self._dirty: set[str] = set()
        self._syncing: set[str] = set()
        # Event ids of the Stops handled lately: Slack delivers at least once.
        self._seen: deque[str] = deque(maxlen=1000)
        # Told of each Stop that ends agents (the follow-ups queued in the thread go too).
        self.on_stop: Callable[[ThreadRef, str], None] = lambda _thread, _user: None
        orchestrator.subscribe(self._on_agent_event)

    def follow_questions(self, humans: SlackHumanChannel) -> None:
        """Questions and approvals opening and closing move sessions to and from suspended."""
        before = humans.on_change

        def changed() -> None:
            before()
            self.changed()

        humans.on_change = changed

    def status_of(self, slug: str) -> SessionStatus:
        live = [a for a in self.orchestrator.agents() if a.task_slug == slug]
        return session_status(live, bool(self.orchestrator.humans.pending_questions(slug)))

    def stream_status(self, slug: str) -> SessionStatus | None:
        """The status a stream of this task ends with; None without a session."""
        task = self._tasks.get(slug)
        if not self.enabled or task is None or task.thread not in self._shown:
            return None
        return self.status_of(slug)

    # -------------------------------------------------------------- following the tasks

    def _on_agent_event(self, event: AgentEvent) -> None:
        task = event.task
        if task.thread is not None and self.enabled:
            self._tasks[task.slug] = TaskThread(task.thread, task.description, task.requester)
            self.changed(task.slug)

    def changed(self, slug: str | None = None) -> None:
        """The task ``slug`` (None: any task with a session not idle, or a question) may
        have another status: send it (once for a burst)."""
        if not self.enabled:
            return
        if slug is not None:
            slugs = {slug}
        else:
            busy = ("processing", "suspended")
            slugs = {s for s, t in self._tasks.items() if self._shown.get(t.thread) in busy}
            slugs |= {q.task_slug for q in self.orchestrator.humans.pending_questions()}
        for each in slugs & set(self._tasks):
            self._dirty.add(each)
            if each not in self._syncing:
                self._syncing.add(each)
                self.background.spawn(self._sync(each), name=f"session of {each}")

    async def _sync(self, slug: str) -> None:
        try:
            while slug in self._dirty and self.enabled:
                self._dirty.discard(slug)
                task = self._tasks.get(slug)
                if task is None:  # closed meanwhile
                    return
                await self._set(task, self.status_of(slug))
        finally:
            self._syncing.discard(slug)

    async def _set(self, task: TaskThread, status: SessionStatus) -> None:
        thread = task.thread
        if thread in self._refused or self._shown.get(thread) == status:
            return
        params: dict[str, Any] = {}
        if thread not in self._shown:  # the creating call names it and who asked
            params["title"] = session_title(task.request)
            if task.requester:
                params["initiator_user_id"] = task.requester
        try:
            response = await self.client.agents_sessions_setStatus(
                channel_id=thread.channel, thread_ts=thread.thread_ts, status=status, **params
            )
        except CALL_ERRORS as exc:
            error = classify(exc)
            self._refuse(thread, error.error, error.transient)
            return
        self._shown[thread] = status
        answer = response.data if isinstance(response.data, dict) else {}
        if UNSUBSCRIBED in warnings_of(answer) and not self._warned:
            self._warned = True
            logger.warning(SUBSCRIBE_HINT, UNSUBSCRIBED)

    def _refuse(self, thread: ThreadRef, error: str, transient: bool) -> None:
        if error in NOT_AN_AGENT:
            if self.enabled:
                self.enabled = False
                logger.warning(ENABLE_HINT, error)
        elif transient:  # tried again at the task's next change
            logger.info("agent session of %s not set (%s)", thread, error)
        else:
            logger.info("agent session of %s refused (%s): left alone", thread, error)
            self._refused.add(thread)

    async def after_restart(self, interrupted: Sequence[tuple[str, DispatchRecord]]) -> None:
        """The tasks whose agents a restart interrupted: their sessions, left processing in
        Slack by the stopped bot, get their status now."""
        for slug in dict.fromkeys(slug for slug, _ in interrupted):
            try:
                task = await self.orchestrator.tasks.task(slug)
            except HarnessError:
                continue
            if task.thread is not None and self.enabled:
                self._tasks[slug] = TaskThread(task.thread, task.description, task.requester)
                self._shown[task.thread] = "processing"  # as the stopped bot left it
                self.changed(slug)

    async def close(self, thread: ThreadRef) -> None:
        """The thread's task is gone: so is its session."""
        for slug in [s for s, t in self._tasks.items() if t.thread == thread]:
            self._tasks.pop(slug)
        if self.enabled and thread in self._shown and thread not in self._refused:
            try:
                await self.client.agents_sessions_setStatus(
                    channel_id=thread.channel, thread_ts=thread.thread_ts, status="closed"
                )
            except CALL_ERRORS as exc:
                logger.info("agent session of %s not closed (%s)", thread, classify(exc).error)
        self._shown.pop(thread, None)

    # -------------------------------------------------------------- Stop

    async def on_stopped(self, body: dict[str, Any], event: dict[str, Any]) -> None:
        """Bolt's listener of ``agent_session_stopped`` (acked already): handled apart, once
        per delivery."""
        event_id = str(body.get("event_id") or "")
        if event_id and event_id in self._seen:
            return
        self._seen.append(event_id)
        thread = ThreadRef(str(event.get("channel") or ""), str(event.get("thread_ts") or ""))
        user = str(event.get("user") or "")
        if thread.channel and thread.thread_ts and user:
            self.background.spawn(self.stop(thread, user), name=f"stop {thread}")

    async def stop(self, thread: ThreadRef, user: str) -> str:
        """Someone pressed Stop in ``thread``: stops its task's live agents if they may;
        what was done, in a few words (for the log)."""
        outcome = await self._stop(thread, user)
        # The request's log line: ids only (they are untrusted input), never a message.
        who, where = (re.sub(r"[^A-Za-z0-9]", "?", v[:20]) for v in (user, thread.channel))
        logger.info("event %s from %s in %s: %s", STOP_EVENT, who, where, outcome)
        decision = outcome.split()[0].strip(",")
        self.metrics.slack_events.labels(f"event {STOP_EVENT}", decision).inc()
        return outcome

    async def _unfinished_elsewhere(self, task: Task) -> bool:
        """Whether another process's run still has an unfinished agent in ``task``."""
        try:
            return await self.orchestrator.tasks.unfinished_elsewhere(task.dispatches)
        except HarnessError:
            return False

    async def _stop(self, thread: ThreadRef, user: str) -> str:
        try:
            task = await self.orchestrator.tasks.find_task(thread)
        except HarnessError as exc:
            logger.warning("Stop in %s: its task cannot be read: %s", thread, exc)
            task = None
        if task is None:
            await self.poster.ephemeral(thread.channel, user, NO_TASK, thread.thread_ts)
            await self.close(thread)
            return "no task"
        self._tasks.setdefault(task.slug, TaskThread(thread, task.description, task.requester))
        live = [a for a in self.orchestrator.agents() if a.task_slug == task.slug]
        if not live:
            elsewhere = await self._unfinished_elsewhere(task)
            text = HELD_BY_A_STOPPED_REPLICA if elsewhere else NOTHING_TO_STOP
            await self.poster.ephemeral(thread.channel, user, text, thread.thread_ts)
            if elsewhere:
                return "held by a stopped replica"
            if self._shown.get(thread) in (None, "processing"):  # e.g. shown before a restart
                self.changed(task.slug)
            return "nothing running"
        reason = f"stopped from Slack by {user} with the Stop button"
        stopped = await asyncio.gather(
            *(stop_agent(self.orchestrator, self.watcher, a.agent_id, reason, user) for a in live),
            return_exceptions=True,
        )
        # The task's agents share its requester: the core refuses all of them or none.
        refused = next((r for r in stopped if isinstance(r, NotAllowedError)), None)
        if refused is not None:
            text = stop_refusal(refused)
            await self.poster.ephemeral(thread.channel, user, text, thread.thread_ts)
            return "refused, not the requester or an admin"
        self.on_stop(thread, user)
        self.background.spawn(self.poster.post(thread, stop_notice(user, live)), name="stopped")
        for agent, done in zip(live, stopped, strict=True):
            if isinstance(done, BaseException):
                logger.warning("Stop could not end agent %s: %s", agent.agent_id, done)
        return f"stopping {len(live)} agent(s)"
