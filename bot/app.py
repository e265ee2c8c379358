"""The Slack app: a slack_bolt ``AsyncApp`` wired to the orchestrator.

``create_app`` is the one factory (the client is injectable, e.g. pointed at a loopback
Slack); ``bot.server`` serves what it returns over Socket Mode or HTTP.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import aiohttp
from slack_bolt.app.async_app import AsyncApp
from slack_bolt.context.ack.async_ack import AsyncAck
from slack_bolt.context.async_context import AsyncBoltContext
from slack_bolt.context.respond.async_respond import AsyncRespond
from slack_sdk.http_retry.builtin_async_handlers import AsyncRateLimitErrorRetryHandler
from slack_sdk.web.async_client import AsyncWebClient

from bot import unfinished
from bot.access import check_access
from bot.background import Background
from bot.blocks import REPOSITORY_ACTION_PREFIX, RERUN_ACTION
from bot.clicks import Clicks
from bot.commands import Commands
from bot.conversations import Conversations
from bot.drafted import DraftedAgents
from bot.home import HomeTab
from bot.limits import wire_limits
from bot.memory import RememberingConversations, wire_memory
from bot.outbox import AgentRef, Outbox
from bot.parsing import (
    Decision,
    FollowUp,
    Ignore,
    MentionInUnboundThread,
    clicked_thread,
)
from bot.poster import Poster, SlackClient
from bot.progress import AgentWatcher
from bot.pull_request_views import FIX_CHECKS_ACTION, OPEN_PR_ACTION
from bot.pull_requests import PullRequestThreads
from bot.questions import (
    ACTION_PATTERN,
    SlackHumanChannel,
    approval_refusal,
    closed_buttons,
    closed_in_task,
    closed_notice,
    parse_button_value,
)
from bot.replica_intake import before_deciding
from bot.reviews import SlackReviews
from bot.sessions import STOP_EVENT, AgentSessions
from bot.settings import BotOptions, SlackEnv
from bot.shared_files import SlackFileChannel
from bot.surfaces import register_surfaces
from harness.agents.orchestrator import Orchestrator
from harness.agents.questions import Question, answer_for
from harness.agents.reviews import Reviews
from harness.agents.visibility import is_direct_message
from harness.errors import NotAllowedError
from harness.metrics import Metrics
from harness.project import task_ledger
from harness.tasks.ledger import Ledger
from harness.tasks.model import DispatchRecord, ThreadRef

logger = logging.getLogger(__name__)

# What a thread button does: (thread, the button's value, who clicked, the payload) -> why not.
ThreadAct = Callable[[ThreadRef, str, str, dict[str, Any]], Awaitable[str | None]]


class _BoltNotices(logging.Filter):
    """Bolt's notices as the bot's log should have them. Bolt reads SLACK_BOT_TOKEN itself and
    then says it is unused next to our client: dropped. A request with a bad signature is
    logged at INFO with its whole body and signature: kept, without them."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        if "`token` will be unused" in message:
            return False
        if message.startswith("Invalid request signature detected"):
            record.msg, record.args = "Invalid request signature detected: answered 401", ()
        return True


# Bolt's own logger stays in the slack_bolt namespace (the name Bolt itself would give it), so
# its debug dumps of request and response bodies follow the Slack SDK's log level, not ours.
# Bolt hands its filters on to the loggers of its middleware.
bolt_logger = logging.getLogger("slack_bolt.AsyncApp")
bolt_logger.addFilter(_BoltNotices())


def _safe(value: object, limit: int = 40) -> str:
    """An id from a payload, fit for one log line (payloads are untrusted input)."""
    text = str(value or "")[:limit]
    return "".join(c if c.isalnum() or c in "_-./" else "?" for c in text) or "-"


def log_request(
    metrics: Metrics, kind: str, user: object, channel: object, outcome: str, started: float
) -> None:
    """The one INFO line per Slack request the bot handled: what came, from whom, where, what
    the bot decided and how long deciding took. Ids and decisions only: never a token, a
    secret or a message's text. Counted in ``metrics`` too (the decision by its first word,
    "ignored", "new", "refused"…, so ids stay out of the labels)."""
    seconds = time.perf_counter() - started
    logger.info(
        "%s from %s in %s: %s (%.1f ms)", kind, _safe(user), _safe(channel), outcome, seconds * 1000
    )
    decision = outcome.partition(":")[0].split(" ", 1)[0].strip(",.") or "-"
    metrics.slack_events.labels(kind, decision).inc()
    metrics.slack_ack_latency.observe(seconds)


def describe_decision(decision: Decision) -> str:
    if isinstance(decision, Ignore):
        return f"ignored: {decision.reason}"
    if isinstance(decision, FollowUp):
        return "follow-up"
    if isinstance(decision, MentionInUnboundThread):
        return "new task with the thread's earlier messages"
    return "new task"


def event_kind(event: Mapping[str, Any]) -> str:
    subtype = event.get("subtype")
    kind = f"event {_safe(event.get('type'))}"
    return f"{kind}/{_safe(subtype)}" if subtype else kind


def make_client(
    env: SlackEnv, options: BotOptions | None = None, metrics: Metrics | None = None
) -> AsyncWebClient:
    """The Web API client: base URL from SLACK_API_URL, rate limits retried after
    Retry-After (on top of slack_sdk's default connection-error retries)."""
    retries = (options or BotOptions()).rate_limit_retries
    client = SlackClient(token=env.bot_token, base_url=env.api_url)  # fails as CALL_ERRORS
    if metrics is not None:
        client.on_error = lambda method: metrics.slack_api_errors.labels(method).inc()
    client.retry_handlers.append(AsyncRateLimitErrorRetryHandler(max_retry_count=retries))
    return client


@dataclass
class HarnessBot:
    app: AsyncApp
    client: AsyncWebClient
    orchestrator: Orchestrator
    conversations: Conversations
    commands: Commands
    background: Background
    options: BotOptions
    ledger: Ledger
    outbox: Outbox
    # Dispatches this start found interrupted (recovery ran before the bot was made).
    interrupted: list[tuple[str, DispatchRecord]] = field(default_factory=list)
    # The bot made its client, so it gives it one keep-alive HTTP session and closes it.
    owns_client: bool = False
    # HTTP mode checks signatures itself before it acks an event (Bolt checks them again).
    signing_secret: str = field(default="", repr=False)
    # Its Prometheus metrics (``/metrics``), its own registry.
    metrics: Metrics = field(default_factory=Metrics)
    sessions: AgentSessions | None = None  # Slack's agent sessions of its task threads
    clicks: Clicks | None = None  # buttons' work kept until answered, taken up at start
    reviews: SlackReviews | None = None  # pull requests' reviews (a routine's event too)

    async def start(self) -> None:
        """Loads what is on disk (thread bindings, requesters, deliveries seen) before the
        first event, then sends what the threads are still owed: results that were not
        delivered, and the agents that ended (or were interrupted) while the bot was away."""
        if self.owns_client and self.client.session is None:
            # One pooled session instead of a new connection per Web API call, bounded by
            # the client's timeout (a session's own default waits 5 minutes on a hung call).
            timeout = aiohttp.ClientTimeout(total=self.client.timeout)
            self.client.session = aiohttp.ClientSession(timeout=timeout)
        await self.conversations.load()
        self.outbox.start()
        await self.orchestrator.keep_warm()  # spare agents: requests start at once
        settled = await self.conversations.watcher.resume(self.interrupted)
        if self.sessions is not None:
            await self.sessions.after_restart(self.interrupted)
        if settled:
            logger.info("settled %d agent(s) that ended while the bot was away", settled)
        replayed = await unfinished.replay_intake(self.conversations)
        if replayed:
            logger.info("handling %d request(s) the bot had taken on before it stopped", replayed)
        if self.clicks is not None and (resumed := await self.clicks.resume()):
            logger.info("taking up %d click(s) the bot had not answered before it stopped", resumed)

    def begin_shutdown(self) -> None:
        """From now on no message starts an agent (the orchestrator is about to stop them)."""
        self.conversations.closing = True

    async def close(self) -> None:
        """Waits for the bot's own work in flight (e.g. the final posts of agents that a
        shutdown just stopped), then for the outbox, ``drain_timeout`` in all: a Slack that
        hangs holds a stop up once, not once for each; then closes what the bot opened."""
        left = await self.background.drain(self.options.drain_timeout)
        # What Slack has not taken by now stays in the ledger for the next start.
        await self.outbox.stop(left)
        await self.ledger.close()
        if self.owns_client and self.client.session is not None:
            session, self.client.session = self.client.session, None
            await session.close()


def create_app(
    orchestrator: Orchestrator,
    env: SlackEnv,
    *,
    client: AsyncWebClient | None = None,
    options: BotOptions | None = None,
) -> HarnessBot:
    options = options or BotOptions()
    owns_client = client is None
    metrics = Metrics()
    metrics.watch(orchestrator, orchestrator.humans.pending_questions)
    client = client or make_client(env, options, metrics)
    config = orchestrator.config
    # Bolt acks events before it runs listeners (process_before_response=False): the
    # listeners only decide and hand the work to background tasks.
    app = AsyncApp(
        name="app.py",  # else Bolt walks inspect.stack() for this name: 0.04-0.08 CPU-s
        logger=bolt_logger,
        client=client,
        signing_secret=env.signing_secret or "",
        process_before_response=False,
    )
    background = Background()
    poster = Poster(client)
    # The orchestrator's clock: the ledger's times, and so the dedupe's and the outbox's.
    ledger = task_ledger(config, orchestrator.clock)

    async def read_diff(task_slug: str, agent_id: str) -> str | None:
        return await orchestrator.tasks.diff(task_slug, await orchestrator.record(agent_id))

    async def given_up(agent: AgentRef, reason: str) -> None:
        await orchestrator.tasks.note_undelivered(agent["task_slug"], agent["agent_id"], reason)

    outbox = Outbox(
        ledger,
        client,
        poster,
        read_diff=read_diff,
        on_given_up=given_up,
        max_delay=options.delivery_retry_limit,
        undelivered=metrics.undelivered_posts,
    )
    watcher = AgentWatcher(
        orchestrator,
        poster,
        ledger,
        outbox,
        background,
        interval=options.status_interval,
        streaming=options.stream_replies,
    )
    conversations = RememberingConversations(
        orchestrator, poster, watcher, background, ledger, outbox,
        settings=config.slack, options=options,
    )  # fmt: skip
    DraftedAgents(orchestrator, watcher, background)
    reviews = SlackReviews(Reviews.of(orchestrator), poster, watcher, background)
    conversations.reviews = reviews
    commands = Commands(
        orchestrator,
        poster,
        watcher,
        background,
        settings=config.slack,
        options=options,
    )

    async def on_message(
        body: dict[str, Any], event: dict[str, Any], context: AsyncBoltContext
    ) -> None:
        started = time.perf_counter()
        event_id = body.get("event_id") if isinstance(body.get("event_id"), str) else None
        # Replicas: what the others saw first (this delivery, the thread's task) counts here.
        await before_deciding(conversations, event, event_id, context.bot_user_id or "")
        decision = conversations.on_message_event(
            event, event_id=event_id, bot_user_id=context.bot_user_id or ""
        )
        edited = event.get("message")  # an edit carries its author in the edited message
        user = event.get("user") or (edited.get("user") if isinstance(edited, dict) else None)
        channel = event.get("channel")
        log_request(metrics, event_kind(event), user, channel, describe_decision(decision), started)

    async def on_command(ack: AsyncAck, respond: AsyncRespond, command: dict[str, Any]) -> None:
        started = time.perf_counter()
        outcome = await commands.handle(ack, respond, command)
        kind = f"command {_safe(command.get('command'))}"
        log_request(
            metrics, kind, command.get("user_id"), command.get("channel_id"), outcome, started
        )

    home = HomeTab(client, orchestrator, poster, background, settings=config.slack,
                   recent=options.recent_tasks)  # fmt: skip
    humans = SlackHumanChannel(poster, closed_in_task(orchestrator))
    humans.on_change = home.changed
    orchestrator.humans.add_human_channel(humans)
    orchestrator.files.add_file_channel(SlackFileChannel(poster))  # files agents share, in threads
    sessions = AgentSessions(client, orchestrator, poster, watcher, background, metrics)
    sessions.follow_questions(humans)
    watcher.session_status = sessions.stream_status
    sessions.on_stop = conversations.stop_queued

    async def answer_from_button(
        user: str, body: dict[str, Any], action: dict[str, Any], respond: AsyncRespond
    ) -> str:
        channel = str((body.get("channel") or {}).get("id", ""))
        refusal = check_access(config.slack, user, channel, is_dm=is_direct_message(channel))
        if refusal is not None:
            await respond(text=refusal.text, response_type="ephemeral", replace_original=False)
            return "refused: not allowed"
        picked = parse_button_value(
            str(action.get("value", "")), orchestrator.humans.pending_questions()
        )
        answer = answer_for(picked[0], picked[1], user) if picked is not None else None
        answered = False
        if picked is not None and answer is not None:
            refused = await elsewhere(picked[0], clicked_thread(body))
            if refused is None:
                try:
                    answered = orchestrator.humans.answer_question(picked[0].question_id, answer)
                except NotAllowedError as exc:  # the core says who may decide an approval
                    refused = approval_refusal(exc)
            if refused is not None:
                await respond(text=refused, response_type="ephemeral", replace_original=False)
                return "refused: " + refused
        if picked is None or not answered:
            outcome = await humans.outcome(str(action.get("value", "")), clicked_thread(body))
            await respond(
                text=closed_notice(outcome), response_type="ephemeral", replace_original=False
            )
            # Its question is gone with no word of how it closed: its buttons go too. One
            # that closed here keeps the record its thread shows.
            if picked is None and outcome is None:
                await close_stale_buttons(body)
            return "ignored: the question is closed"
        return f"answered question {_safe(picked[0].question_id)}"

    async def close_stale_buttons(body: dict[str, Any]) -> None:
        message = body.get("message") or {}
        channel = str((body.get("channel") or {}).get("id", ""))
        closed = closed_buttons(message) if isinstance(message, dict) else None
        if closed is not None and channel and message.get("ts"):
            await poster.update(channel, str(message["ts"]), closed)

    async def elsewhere(question: Question, thread: ThreadRef) -> str | None:
        """Why ``question`` may not be answered from ``thread``; None when it is its task's
        own thread (who may decide an approval is the core's to say)."""
        task = await orchestrator.tasks.task(question.task_slug)
        if task.thread != thread:
            return "This question belongs to another thread: answer it there."
        return None

    async def on_answer_button(
        ack: AsyncAck, body: dict[str, Any], action: dict[str, Any], respond: AsyncRespond
    ) -> None:
        started = time.perf_counter()
        await ack()
        user = str((body.get("user") or {}).get("id", ""))
        channel = str((body.get("channel") or {}).get("id", ""))
        outcome = await answer_from_button(user, body, action, respond)
        log_request(
            metrics, f"action {_safe(action.get('action_id'))}", user, channel, outcome, started
        )

    def thread_button(act: ThreadAct, did: str) -> Callable[..., Awaitable[None]]:
        """A button that acts in the thread it was clicked in: ``act(thread, value, user,
        body)`` says why it may not (None when it acted); a refusal reaches the clicker."""

        async def on_click(
            ack: AsyncAck, body: dict[str, Any], action: dict[str, Any], respond: AsyncRespond
        ) -> None:
            started = time.perf_counter()
            user = str((body.get("user") or {}).get("id", ""))
            thread = clicked_thread(body)
            value = str(action.get("value", ""))
            refused = await act(thread, value, user, body)  # keeps the click, then acks it
            await ack()
            if refused is not None:
                await respond(text=refused, response_type="ephemeral", replace_original=False)
            outcome = f"refused: {refused}" if refused else f"{did} {_safe(value)}"
            kind = f"action {_safe(action.get('action_id'))}"
            log_request(metrics, kind, user, thread.channel, outcome, started)

        return on_click

    async def choose_repository(
        thread: ThreadRef, name: str, user: str, body: dict[str, Any]
    ) -> str | None:
        return await unfinished.choose_repository(conversations, thread, name, user)

    async def run_again(
        thread: ThreadRef, agent_id: str, user: str, body: dict[str, Any]
    ) -> str | None:
        notice = body.get("message")
        return await unfinished.run_again(
            conversations, thread, agent_id, user, notice if isinstance(notice, dict) else None
        )

    app.action(RERUN_ACTION)(thread_button(run_again, "run again:"))
    clicks = Clicks(ledger, background, outbox.backlog)
    clicks.on("rerun", lambda click: unfinished.resume_run_again(conversations, clicks, click))
    commands.forges.clicks = clicks
    clicks.on("link", commands.forges.resume_link)
    pulls = PullRequestThreads(
        orchestrator.pull_requests, orchestrator.tasks, poster, watcher, background, outbox, clicks
    )
    app.action(OPEN_PR_ACTION)(thread_button(pulls.open, "pull request of"))
    app.action(FIX_CHECKS_ACTION)(thread_button(pulls.fix, "fix the checks of"))
    commands.reviews = reviews
    wire_memory(app, conversations, commands, clicks)  # remember, /harness memory, proposals
    wire_limits(app, conversations, clicks)  # the spend limits' *Raise for this task* button
    app.action(ACTION_PATTERN)(on_answer_button)
    app.action(re.compile(rf"^{REPOSITORY_ACTION_PREFIX}\d+$"))(
        thread_button(choose_repository, "repository")
    )
    app.event("message")(on_message)
    app.event("app_mention")(on_message)
    app.command("/harness")(on_command)
    app.event(STOP_EVENT)(sessions.on_stopped)
    register_surfaces(app, orchestrator=orchestrator, conversations=conversations,
                      commands=commands, poster=poster, home=home)  # fmt: skip
    return HarnessBot(
        app=app,
        client=client,
        orchestrator=orchestrator,
        conversations=conversations,
        commands=commands,
        background=background,
        options=options,
        ledger=ledger,
        outbox=outbox,
        owns_client=owns_client,
        signing_secret=env.signing_secret or "",
        metrics=metrics,
        sessions=sessions,
        clicks=clicks,
        reviews=reviews,
    )
