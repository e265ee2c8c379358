"""Every thread is a task: what the bot does with a person's message.

A top-level DM or @mention starts a task bound to its thread; later messages in a bound
thread are follow-ups on it (routed, else the thread's last role; the agent sees the task's
history first); an @mention in an unbound thread starts a task with the thread's earlier
messages as context. One run per user message (deduplicated by event id and by message),
and one agent at a time per thread (a follow-up waits its turn and the thread says so).
Work a stop cut short is taken up again by bot/unfinished.py.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from typing import Any

from bot.access import check_access
from bot.assistant import FIRST_STATUS
from bot.attachments import SlackFile, files_of, left_out_text, with_files_text
from bot.background import Background
from bot.blocks import (
    cut_notice,
    failure_message,
    mention,
    repository_question,
    waiting_text,
)
from bot.dedupe import Dedupe
from bot.downloads import FileDownloads
from bot.limits import over_limit, refused_request
from bot.outbox import Outbox
from bot.parsing import (
    MAX_TEXT_CHARS,
    Decision,
    FollowUp,
    Ignore,
    MentionInUnboundThread,
    NewTask,
    UserMessage,
    decide,
    earlier_messages,
    parse_message_event,
    thread_task_description,
)
from bot.plans import draft_request, unseen
from bot.poster import Poster
from bot.progress import FAILED, AgentWatcher
from bot.questions import approval_refusal, names_an_agent, pick_question
from bot.requesters import migrate_requesters
from bot.settings import BotOptions
from bot.threads import ThreadIndex, ThreadLanes
from bot.unrecorded import NotRecordedError, UnrecordedRequests, intake_key, not_recorded
from harness.agents.orchestrator import Orchestrator
from harness.agents.questions import answer_for
from harness.config.settings import SlackSettings
from harness.errors import HarnessError, NotAllowedError, TaskDamagedError, repair_command
from harness.tasks.ledger import Ledger
from harness.tasks.model import ThreadRef

logger = logging.getLogger(__name__)


EYES, ANSWERED = "eyes", "speech_balloon"
TRY_AGAIN = "try again in a moment; if it keeps failing, ask an admin to look at the bot's log."
RESEND = "send your message again once I am back."


class Conversations:
    def __init__(
        self,
        orchestrator: Orchestrator,
        poster: Poster,
        watcher: AgentWatcher,
        background: Background,
        ledger: Ledger,
        outbox: Outbox,
        *,
        settings: SlackSettings,
        options: BotOptions,
    ) -> None:
        self.orchestrator = orchestrator
        self.poster = poster
        self.watcher = watcher
        self.background = background
        self.ledger = ledger
        self.outbox = outbox
        self.settings = settings
        self.index = ThreadIndex()
        self.lanes = ThreadLanes(background)
        self.dedupe = Dedupe(ledger, options.dedupe_ttl)
        # Set when the bot shuts down: no new agent starts after that.
        self.closing = False
        # Per thread: the bot-started agent working there now (role, agent id).
        self._current: dict[ThreadRef, tuple[str, str]] = {}
        # Per thread: a request waiting for its person to pick the repository it is about.
        self._choosing: dict[ThreadRef, tuple[NewTask | MentionInUnboundThread, str]] = {}
        # Per message taken on (its intake key): the files it shared, fetched for its agent.
        self._files: dict[str, tuple[SlackFile, ...]] = {}
        self.downloads = FileDownloads(poster.client, settings.files)
        # Per thread: how many Stops were pressed there, and by whom last.
        self._stops: dict[ThreadRef, tuple[int, str]] = {}
        # Requests the ledger could not record (its disk full), handled once it can.
        self.unrecorded = UnrecordedRequests(outbox, self.lanes, self.dedupe.unsaved)

    async def load(self) -> None:
        """The thread bindings, requesters and deliveries already seen, from disk."""
        self.index.load(await self.orchestrator.tasks.task_summaries())
        # A damaged task's thread is still its own: a reply there hears why nothing starts.
        for damaged in await self.orchestrator.tasks.damaged_tasks():
            if damaged.thread is not None and not self.index.is_bound(damaged.thread):
                self.index.bind(damaged.thread, damaged.slug)
        await migrate_requesters(self.orchestrator.tasks, self.orchestrator.config.tasks_dir)
        await self.dedupe.load()

    # ------------------------------------------------------------------ intake (no awaits)

    def on_message_event(
        self,
        event: Mapping[str, Any],
        *,
        event_id: str | None,
        bot_user_id: str,
        replay: bool = False,
    ) -> Decision:
        """Decides at once (nothing awaited, so duplicates cannot slip in between) and
        starts the work in the background. ``replay``: a request taken on before a restart
        and never handled, handled now."""
        if event_id and not replay and not self.dedupe.first_time(f"event:{event_id}"):
            return Ignore("duplicate", "duplicate delivery")
        if event_id:
            self._spawn(self.dedupe.save(), "remember event")
        parsed = parse_message_event(event, bot_user_id)
        if isinstance(parsed, Ignore):
            return parsed
        files = files_of(event)
        if files and not parsed.text:  # files alone still ask the agent to look at them
            parsed = dataclasses.replace(parsed, text=with_files_text("", files), invisible=False)
        bound = self.index.is_bound(parsed.thread)
        decision = decide(parsed, bound=bound)
        if replay and bound and parsed.text and isinstance(decision, Ignore):
            # Its task was made before the stop, but no agent started on it: go on there.
            decision = FollowUp(parsed)
        if isinstance(decision, Ignore):
            if decision.kind in ("invisible", "directives only"):
                self._say_unseen(parsed)
            return decision
        if not self.dedupe.first_time(intake_key(parsed)) and not replay:
            # The app_mention + message pair of one mention.
            return Ignore("already handled", "message already handled")
        self._spawn(self.dedupe.save(), "remember message")
        refusal = check_access(self.settings, parsed.user, parsed.channel, is_dm=parsed.is_dm)
        if refusal is not None:
            self._spawn(
                self.poster.ephemeral(parsed.channel, parsed.user, refusal.text, parsed.thread_ts),
                "refuse",
            )
            return Ignore("not allowed", "not allowed")
        self.poster.note(parsed.thread, parsed.ts)
        if parsed.cut:
            self._spawn(
                self.poster.ephemeral(
                    parsed.channel,
                    parsed.user,
                    cut_notice(MAX_TEXT_CHARS, parsed.cut),
                    parsed.thread_ts,
                ),
                "cut notice",
            )
        thread = parsed.thread
        if isinstance(decision, FollowUp) and self._answer_question(parsed):
            return decision
        self._spawn(self.poster.react(parsed.channel, parsed.ts, EYES), "eyes")
        self._spawn(self.watcher.thread_status.show(thread, FIRST_STATUS), "status")
        if isinstance(decision, FollowUp):
            busy = self._busy_agents(thread)
            if busy or self.lanes.busy(thread):
                self._spawn(self.poster.post(thread, waiting_text(busy)), "waiting")
            job = self._guarded(parsed, lambda: self._follow_up(parsed))
        else:
            self.index.reserve(thread)
            job = self._guarded(parsed, lambda: self._start(decision, bot_user_id))
        # Taken on: the ledger keeps it with its seen key until an agent or a reply has it.
        self.dedupe.take_in(intake_key(parsed), {"event": dict(event), "botUserId": bot_user_id})
        if files:
            self._files[intake_key(parsed)] = files
        if isinstance(decision, FollowUp):
            job = self._unless_stopped(parsed, job)
        self.lanes.enqueue(thread, job, name=f"message {parsed.channel}/{parsed.ts}")
        return decision

    def stop_queued(self, thread: ThreadRef, user: str) -> None:
        """Someone pressed Stop in ``thread``: the follow-ups waiting there do not start."""
        self._stops[thread] = (self._stops.get(thread, (0, ""))[0] + 1, user)

    def _unless_stopped(
        self, message: UserMessage, job: Callable[[], Awaitable[None]]
    ) -> Callable[[], Awaitable[None]]:
        queued = self._stops.get(message.thread, (0, ""))[0]

        async def run() -> None:
            stops, by = self._stops.get(message.thread, (0, ""))
            if stops == queued:
                await job()
                return
            note = f"⏹️ Not started: {mention(by)} pressed Stop before this message's turn."
            await self.poster.post(message.thread, note)
            await self.poster.react(message.channel, message.ts, "x")
            self._files.pop(intake_key(message), None)
            await self.unrecorded.handled(intake_key(message))

        return run

    def _say_unseen(self, message: UserMessage) -> None:
        """A message addressed to the bot with nothing to do in it (nothing visible, or only
        directives): say so, to its person only (a mention and its message event say it once)."""
        if not self.dedupe.first_time(intake_key(message)):
            return
        if check_access(self.settings, message.user, message.channel, is_dm=message.is_dm):
            return
        said = self.poster.ephemeral(
            message.channel, message.user, unseen(message), message.thread_ts
        )
        self._spawn(said, "nothing to do")

    def wait_again_for_repository(self, message: UserMessage, bot_user_id: str) -> bool:
        """Waits again for the repository of a request asked about before a stop (see
        bot/unfinished.py); False when the thread has a task by now (it is handled anew)."""
        decision = decide(message, bound=self.index.is_bound(message.thread))
        if not isinstance(decision, NewTask | MentionInUnboundThread):
            return False
        self.index.reserve(message.thread)
        self._choosing[message.thread] = (decision, bot_user_id)
        return True

    def _answer_question(self, message: UserMessage) -> bool:
        """A reply in a thread where an agent waits on ``ask_human`` answers it (instead of
        starting a follow-up). True when it did."""
        slug = self.index.slug(message.thread)
        picked = pick_question(self.orchestrator.humans.pending_questions(slug), message.text)
        if slug is None or picked is None:
            return False
        question, text = picked
        if not names_an_agent(message.text) and not self.orchestrator.humans.may_decide(
            message.user, question.requester
        ):
            # Someone else in the thread talks to the bot, not to the agent's question: a
            # follow-up (queued with a notice while the agent works), never a refused answer.
            return False
        answer = answer_for(question, text, message.user)
        if answer is None:  # no verdict on the approval: an ordinary follow-up
            return False
        try:
            answered = self.orchestrator.humans.answer_question(question.question_id, answer)
        except NotAllowedError as refused:
            # Taken as an answer that was refused, not as a follow-up for a new agent.
            text = approval_refusal(refused)
            self._spawn(
                self.poster.ephemeral(message.channel, message.user, text, message.thread_ts),
                "refuse approver",
            )
            return True
        if not answered:
            return False
        self._spawn(self.poster.react(message.channel, message.ts, ANSWERED), "answered")
        return True

    def _spawn(self, coro: Coroutine[Any, Any, Any], name: str) -> None:
        self.background.spawn(coro, name=name)

    def _busy_agents(self, thread: ThreadRef) -> list[tuple[str, str]]:
        slug = self.index.slug(thread)
        busy = [(a.role, a.agent_id) for a in self.orchestrator.agents() if a.task_slug == slug]
        current = self._current.get(thread)
        if current is not None and current not in busy:
            busy.insert(0, current)
        return busy

    # ------------------------------------------------------------------ jobs

    def _guarded(
        self, message: UserMessage, work: Callable[[], Awaitable[None]]
    ) -> Callable[[], Awaitable[None]]:
        async def job() -> None:
            try:
                # Nothing runs for a message before the ledger knows it was seen: a delivery
                # that comes again after a restart must not run it twice.
                if not await self.dedupe.save():
                    raise NotRecordedError("the ledger cannot record it")
                await work()
            except NotRecordedError:  # a full disk: it waits (its person is told), not lost
                await self.unrecorded.defer(intake_key(message), message.thread, job)
                return
            except Exception:  # the top of one message's handling: the person must hear back
                logger.exception("handling message %s/%s failed", message.channel, message.ts)
                await self._fail(message, "Something went wrong on my side with this message.")
            if not self._waits_for_repository(message):
                self._files.pop(intake_key(message), None)
                await self.unrecorded.handled(intake_key(message))

        return job

    def _waits_for_repository(self, message: UserMessage) -> bool:
        pending = self._choosing.get(message.thread)
        return pending is not None and pending[0].message == message

    async def _fail(
        self,
        message: UserMessage,
        what: str,
        next_step: str = TRY_AGAIN,
        agent_id: str | None = None,
    ) -> None:
        notice = failure_message(what, next_step=next_step, agent_id=agent_id)
        await self.outbox.owe(
            message.thread,
            [
                {"op": "post", "message": notice},
                {"op": "react", "channel": message.channel, "ts": message.ts, "name": FAILED},
            ],
            handles=intake_key(message),
        )

    def choose_repository(self, thread: ThreadRef, repository: str, user: str) -> str | None:
        """A repository button was clicked in ``thread``: start the waiting request there.
        Why not, when it cannot (None when it started)."""
        pending = self._choosing.get(thread)
        if pending is None:
            return "This request has already started (or was never waiting for a repository)."
        decision, bot_user_id = pending
        if user != decision.message.user and user not in self.settings.admins:
            return "Only the person who asked (or an admin) picks the repository."
        del self._choosing[thread]

        async def start() -> None:
            await self._start(decision, bot_user_id, repository=repository)

        job = self._guarded(decision.message, start)
        self.lanes.enqueue(thread, job, name=f"repository for {thread.channel}/{thread.thread_ts}")
        return None

    async def _start(
        self,
        decision: NewTask | MentionInUnboundThread,
        bot_user_id: str,
        *,
        repository: str | None = None,
    ) -> None:
        message, thread = decision.message, decision.message.thread
        choice = self.orchestrator.tasks.choose_repository(message.text, message.channel)
        if repository is None and choice.status == "ambiguous":
            # The thread stays reserved: the person picks with a button, then it starts.
            self._choosing[thread] = (decision, bot_user_id)
            await self.poster.post(thread, repository_question(choice.candidates))
            # Kept until the click: after a restart the same buttons still start it.
            await self.unrecorded.note(intake_key(message), waitingForRepository=True)
            return
        problem = None if repository is not None else choice.explain()
        if problem is not None:
            # The thread stays free: the person sends the request again, naming the repository.
            self.index.release(thread)
            await self._fail(message, problem, "send it again with the repository named.")
            return
        description = prompt = choice.text
        if isinstance(decision, MentionInUnboundThread):
            replies = await self.poster.replies(thread)
            earlier = earlier_messages(replies, message.ts, bot_user_id)
            description = thread_task_description(choice.text, earlier)
            prompt = choice.text or description
        role = self.orchestrator.route(prompt)
        if await refused_request(self, message, role):  # nothing made: the thread stays free
            return
        try:
            task = await self.orchestrator.tasks.create_task(
                description, thread, repository or choice.repository, requester=message.user
            )
        except HarnessError as exc:
            self.index.release(thread)
            await self._fail(
                message, f"I could not create a task: {exc.message}", exc.fix or TRY_AGAIN
            )
            return
        except BaseException as exc:
            if not_recorded(exc):  # nothing made: the thread stays reserved for its replay
                raise NotRecordedError(str(exc)) from exc
            self.index.release(thread)
            raise
        self.index.bind(thread, task.slug)
        self._spawn(self.watcher.thread_status.title(thread, prompt), "title")
        await self._run(message, task.slug, role, prompt)

    async def _follow_up(self, message: UserMessage) -> None:
        slug = self.index.slug(message.thread)
        if slug is None:  # the task this thread was reserved for could not be created
            return
        try:
            task = await self.orchestrator.tasks.task(slug)
        except TaskDamagedError as exc:  # never a new task without the thread's history
            await self._fail(
                message,
                f"I cannot read this thread's task `{slug}`, so I did not start on your "
                f"message: {exc.problem}",
                f"an admin runs `{repair_command(slug)}` on the bot's machine (it keeps the "
                "damaged task.json aside and writes a fresh one with everything that still "
                "reads), then you reply here again.",
            )
            return
        # After a result with questions, the reply answers them: same role (see route_follow_up).
        role = self.orchestrator.route_follow_up(task, message.text)
        await self._run(message, slug, role, message.text)

    async def _run(self, message: UserMessage, slug: str, role: str, prompt: str) -> None:
        await self._wait_for_agents(slug)
        if self.closing:
            await self._fail(message, "I am shutting down, so I did not start on this.", RESEND)
            return
        files = self._files.pop(intake_key(message), ())
        attachments, left_out = await self.downloads.fetch_all(files) if files else ((), ())
        if left_out:  # the request goes on with what could be had: its person hears what not
            await self.poster.post(message.thread, left_out_text(left_out, kept=len(attachments)))
        try:
            handle = await draft_request(self.orchestrator, message.directives, role, prompt,
                                         task_slug=slug, requested_by=message.user,
                                         attachments=attachments, left_out=left_out)  # fmt: skip
        except (HarnessError, OSError) as exc:  # OSError: the task store's disk, say full
            if await over_limit(self.outbox, message, slug, role, exc):  # with a button to raise it
                return
            why, fix = (exc.message, exc.fix) if isinstance(exc, HarnessError) else (exc, "")
            await self._fail(message, f"I could not start {role}: {why}", fix or TRY_AGAIN)
            return
        self._current[message.thread] = (handle.role, handle.agent_id)
        try:
            await self.watcher.follow(
                message.thread,
                handle.agent_id,
                handle.role,
                task_slug=slug,
                reply_to=message.ts,
                handles=intake_key(message),
                recipient=message.user,
            )
        finally:
            self._current.pop(message.thread, None)

    async def _wait_for_agents(self, slug: str) -> None:
        """Agents of this task still live (e.g. drafted ones nobody awaited) finish first."""
        while live := [a.agent_id for a in self.orchestrator.agents() if a.task_slug == slug]:
            await asyncio.gather(*(self.orchestrator.wait(i) for i in live), return_exceptions=True)
