"""Routines in Slack: each firing becomes a thread in the routine's channel (which routine
fired, when and why), then a task worked as a person's request by its owner would be, its
approvals in the thread for the owner and the admins, its follow-ups open to anyone allowed.

Also the two triggers the bot serves: ``POST /routines/<name>`` (an ``on: http`` routine,
bearer token from its variable) and the GitHub events that ``/github/webhook`` hands over
(``on: github``, the delivery id as the firing's key so a re-delivery runs nothing).
"""

from __future__ import annotations

import asyncio
import hmac
import json
import logging
import os
from collections.abc import Mapping
from typing import Any, Literal

from aiohttp import web

from bot.app import HarnessBot
from bot.background import Background
from bot.blocks import escape, mention
from bot.conversations import Conversations
from bot.poster import CALL_ERRORS, Poster, classify
from bot.progress import AgentWatcher
from bot.reviews import SlackReviews
from bot.routine_views import RoutineViews
from bot.singletons import Singleton
from harness.agents.dispatching import AgentHandle
from harness.agents.orchestrator import Orchestrator
from harness.agents.reviews import ReviewOutcome
from harness.clock import timestamp
from harness.config.routines_schema import Routine, check_routines
from harness.config.settings import Config
from harness.errors import HarnessError
from harness.routines.ledger import open_ledger
from harness.routines.model import Firing, LaunchedRun, RoutineError, RunOutcome
from harness.routines.service import RoutineService
from harness.routines.state import FOLDER, RoutineStates
from harness.routines.template import render_prompt
from harness.tasks.model import ThreadRef, Trigger

logger = logging.getLogger(__name__)

ROUTINES_PATH = "/routines/{name}"
SCHEDULER = "routines"  # the lease of the routines' scheduler
# GitHub's objects whose page a firing links to, in the order looked for.
_LINKED = ("pull_request", "issue", "release", "discussion", "check_run", "workflow_run")


def what_to_start(routine: Routine, firing: Firing) -> Literal["agent", "review"]:
    """A pull request event for a reviewer is a review of that pull request; anything else an
    agent of the routine's role on its prompt."""
    pull = firing.fields.get("pull_request")
    return "review" if routine.role == "reviewer" and isinstance(pull, Mapping) else "agent"


def opening_text(routine: Routine, firing: Firing) -> str:
    """The thread's first message: which routine fired, when and why."""
    line = f"🔁 Routine *{escape(routine.name)}* fired ({escape(firing.why)}) at {firing.at}"
    if firing.link:
        line += f": <{firing.link}>"
    if firing.by:
        line += f", asked by {escape(firing.by)}"
    if routine.owner:
        line += f". It runs for {mention(routine.owner)}."
    return line


class SlackLauncher:
    def __init__(
        self,
        orchestrator: Orchestrator,
        conversations: Conversations,
        poster: Poster,
        watcher: AgentWatcher,
        background: Background,
        reviews: SlackReviews | None = None,
    ) -> None:
        self.orchestrator = orchestrator
        self.conversations = conversations
        self.poster = poster
        self.watcher = watcher
        self.background = background
        self.reviews = reviews
        # The reviews this process started, by their thread's link: how each ended.
        self._reviews: dict[str, asyncio.Task[ReviewOutcome | None]] = {}

    async def _open_thread(self, routine: Routine, text: str) -> ThreadRef:
        try:
            response = await self.poster.client.chat_postMessage(
                channel=routine.channel, text=text, unfurl_links=False
            )
        except CALL_ERRORS as exc:
            error = classify(exc).error
            raise RoutineError(
                routine.name,
                f"Slack refused the routine's post in {routine.channel}: {error}",
                fix="invite the bot to the channel (`/invite @harness`), or fix `channel`",
            ) from exc
        return ThreadRef(routine.channel, str(response["ts"]))

    async def launch(self, routine: Routine, firing: Firing) -> LaunchedRun:
        pull = self._pull_to_review(routine, firing)
        thread = await self._open_thread(routine, opening_text(routine, firing))
        link = await self.poster.permalink(thread) or f"{thread.channel}/{thread.thread_ts}"
        self.conversations.index.reserve(thread)
        trigger = Trigger(routine.name, firing.kind, firing.at, firing.why, firing.link,
                          firing.by, firing=firing.key)  # fmt: skip
        if pull is not None:
            return await self._review(routine, thread, link, trigger, *pull)
        try:
            prompt = render_prompt(routine.name, routine.prompt, firing.fields)
            task = await self.orchestrator.tasks.create_task(
                prompt, thread, routine.repository, requester=routine.owner, trigger=trigger
            )
            self.conversations.index.bind(thread, task.slug)
            handle = await self.start(routine, firing, prompt, task.slug)
        except (HarnessError, OSError) as exc:
            self.conversations.index.release(thread)
            why, fix = (exc.message, exc.fix) if isinstance(exc, HarnessError) else (str(exc), "")
            await self.poster.post(
                thread, f"⚠️ The routine could not start: {why}" + (f"\n*Fix:* {fix}" if fix else "")
            )
            error = RoutineError(routine.name, why, fix=fix)
            error.thread = link
            raise error from exc
        self.background.spawn(
            self.watcher.follow(
                thread, handle.agent_id, handle.role, task_slug=task.slug, recipient=routine.owner
            ),
            name=f"routine {routine.name}",
        )
        return LaunchedRun(task.slug, link, handle.agent_id)

    async def start(self, routine: Routine, firing: Firing, prompt: str, slug: str) -> AgentHandle:
        """The routine's agent on its prompt, in the firing's task."""
        return await self.orchestrator.draft(
            routine.role,
            prompt,
            task_slug=slug,
            requested_by=routine.owner,
            budget_usd=routine.budget_usd,
        )

    def _pull_to_review(self, routine: Routine, firing: Firing) -> tuple[str, str] | None:
        """The pull request (its page, its head) a firing is to review, when it is a review
        (``what_to_start``) of a configured repository's pull request; None: the routine's
        agent on its prompt."""
        if self.reviews is None or what_to_start(routine, firing) != "review":
            return None
        pull = firing.fields["pull_request"]
        url, head = pull.get("html_url"), (pull.get("head") or {}).get("sha")
        if not isinstance(url, str) or not isinstance(head, str):
            return None
        try:
            self.reviews.reviews.repository_of(url)
        except HarnessError:
            return None
        return url, head

    async def _review(
        self, routine: Routine, thread: ThreadRef, link: str, trigger: Trigger, url: str, head: str
    ) -> LaunchedRun:
        """Reviews the pull request in the firing's thread as the bot: the run once its
        reviewer is drafted (or at once when that head's review is there already)."""
        reviews, index = self.reviews, self.conversations.index
        assert reviews is not None
        drafted: asyncio.Future[AgentHandle | None] = asyncio.get_running_loop().create_future()

        def on_reviewer(handle: AgentHandle) -> None:
            if not drafted.done():
                drafted.set_result(handle)

        async def review() -> ReviewOutcome | None:
            try:
                return await reviews.in_thread(
                    thread, url, requested_by=None, head_sha=head, trigger=trigger,
                    on_task=lambda slug: index.bind(thread, slug), on_reviewer=on_reviewer,
                )  # fmt: skip
            finally:
                if not drafted.done():
                    drafted.set_result(None)
                index.release(thread)

        job = self.background.spawn(review(), name=f"routine {routine.name}: review of {url}")
        handle = await drafted
        if handle is not None:
            self._reviews[link] = job
            return LaunchedRun(handle.task_slug, link, handle.agent_id)
        await asyncio.wait([job])  # no reviewer: the head's review is there, or it failed
        done = None if job.cancelled() or job.exception() else job.result()
        if done is None:
            error = RoutineError(routine.name, f"the review of {url} did not start",
                                 fix="see the routine's thread for why")  # fmt: skip
            error.thread = link
            raise error
        self._reviews[link] = job
        return LaunchedRun(done.task_slug or "", link)

    async def outcome(self, routine: Routine, run: LaunchedRun) -> RunOutcome:
        review = self._reviews.pop(run.thread, None)
        if review is not None:
            await asyncio.wait([review])
            cost = (await self.orchestrator.wait(run.agent_id)).cost_usd if run.agent_id else None
            if review.cancelled() or review.exception() or review.result() is None:
                return RunOutcome("failed", cost_usd=cost, error="the review was not posted")
            return RunOutcome("completed", cost_usd=cost)
        if run.agent_id is None:
            return RunOutcome("failed", error="no agent was started")
        record = await self.orchestrator.wait(run.agent_id)
        status = record.status if record.status != "queued" else "interrupted"
        if status == "running":
            status = "interrupted"
        return RunOutcome(status, cost_usd=record.cost_usd, error=record.error)

    async def find(self, routine: Routine, firing: Firing) -> LaunchedRun | None:
        for task in await self.orchestrator.tasks.tasks():
            trigger = task.trigger
            if trigger is None or (trigger.routine, trigger.firing) != (routine.name, firing.key):
                continue
            link = await self.poster.permalink(task.thread) if task.thread else None
            if link is None and task.thread is not None:
                link = f"{task.thread.channel}/{task.thread.thread_ts}"
            agent = task.dispatches[-1].agent_id if task.dispatches else None
            return LaunchedRun(task.slug, link or "", agent)
        return None

    async def notify(self, routine: Routine, text: str) -> None:
        places = [routine.channel] + ([routine.owner] if routine.owner else [])
        for place in places:
            try:
                await self.poster.client.chat_postMessage(channel=place, text=text)
            except CALL_ERRORS as exc:
                logger.warning(
                    "telling %s that routine %s paused failed: %s",
                    place,
                    routine.name,
                    classify(exc).error,
                )


class BotRoutines:
    """The routines of a running bot: their scheduler, and the triggers it serves."""

    def __init__(self, service: RoutineService, config: Config, closing: Any) -> None:
        self.service = service
        self.config = config
        self._closing = closing

    @classmethod
    async def start(cls, bot: HarnessBot) -> BotRoutines | None:
        """The routines served (their triggers, views and requests), or None when
        config.yaml has no routines; their scheduler runs as ``singleton()``. A ConfigError
        when an HTTP trigger's token variable is not set."""
        orchestrator = bot.orchestrator
        config = orchestrator.config
        if not config.routines:
            return None
        check_routines(config.routines, orchestrator.role_names(), os.environ, file=config.file)
        conversations = bot.conversations
        launcher = SlackLauncher(
            orchestrator, conversations, conversations.poster, conversations.watcher,
            bot.background, bot.reviews,
        )  # fmt: skip
        ledger, closing = await open_ledger(config.runtime, config.tasks_dir / FOLDER / "fired")
        service = RoutineService(
            config.routines,
            RoutineStates(config.tasks_dir),
            ledger,
            launcher,
            orchestrator.clock,
            metrics=bot.metrics,
        )
        await service.serve()
        views = RoutineViews(service, config.slack)
        views.register(bot.app)
        bot.commands.routines = views
        if bot.commands.home is not None:
            bot.commands.home.more = views.home_blocks
        logger.info(
            "routines: %s", ", ".join(f"{r.name} ({r.trigger_text()})" for r in config.routines)
        )
        return cls(service, config, closing)

    def singleton(self) -> Singleton:
        """The scheduler, on one replica at a time (each firing is claimed once anyway; one
        ticking saves every other replica the work, and follows each run once)."""
        return Singleton(SCHEDULER, self.service.schedule, self.service.unschedule)

    def add_routes(self, app: web.Application) -> None:
        app.router.add_post(ROUTINES_PATH, http_trigger(self.service))

    async def github(self, event: str, delivery: str, body: bytes) -> list[str]:
        return await github_event(self.service, self.config, event, delivery, body)

    async def close(self) -> None:
        await self.service.close()
        if self._closing is not None:
            await self._closing.close()


# ---------------------------------------------------------------- triggers


def _answer(started: LaunchedRun | str) -> web.Response:
    if isinstance(started, LaunchedRun):
        return web.json_response({"slug": started.slug, "thread": started.thread}, status=202)
    if started.startswith("queued"):
        return web.json_response({"queued": started}, status=202)
    return web.json_response({"error": started}, status=409)


def http_trigger(service: RoutineService) -> Any:
    """``POST /routines/<name>``: 401 without the routine's bearer token, 202 with the task's
    slug and thread link; the JSON body is the prompt's ``payload``."""

    async def handle(request: web.Request) -> web.Response:
        name = request.match_info.get("name", "")
        routine = service.routines.get(name)
        if routine is None or routine.token_env is None:
            return web.json_response({"error": f"no routine {name!r} called over HTTP"}, status=404)
        token = os.environ.get(routine.token_env, "").strip()
        given = request.headers.get("Authorization", "")
        if not token or not hmac.compare_digest(given.encode(), f"Bearer {token}".encode()):
            logger.warning("a call of routine %s without its token was refused", name)
            return web.json_response({"error": "missing or wrong bearer token"}, status=401)
        body = await request.read()
        try:
            payload = json.loads(body) if body.strip() else {}
        except ValueError:
            return web.json_response({"error": "the body is not JSON"}, status=400)
        clock = service.clock
        key = request.headers.get("Idempotency-Key") or clock.token(8)
        firing = Firing(
            routine.name,
            "http",
            f"http:{key}",
            timestamp(clock.now()),
            "an HTTP call",
            by=request.remote,
            fields={"payload": payload},
        )
        return _answer(await service.fire(routine, firing))

    return handle


async def github_event(
    service: RoutineService, config: Config, event: str, delivery: str, body: bytes
) -> list[str]:
    """Fires the ``on: github`` routines that take this event (``event`` or
    ``event.action``, on the routine's repository when it names one); what each did."""
    try:
        payload = json.loads(body)
    except ValueError:
        return []
    if not isinstance(payload, dict) or not delivery:
        return []
    action = payload.get("action")
    names = {event, f"{event}.{action}"} if isinstance(action, str) else {event}
    full_name = str((payload.get("repository") or {}).get("full_name") or "")
    said: list[str] = []
    for routine in service.routines.values():
        if not names & set(routine.events):
            continue
        if routine.repository is not None:
            repository = config.workspaces.repositories.get(routine.repository)
            forge = repository.github if repository is not None else None
            if forge is None or forge.full_name.lower() != full_name.lower():
                continue
        pages = (payload[k].get("html_url") for k in _LINKED if isinstance(payload.get(k), dict))
        link = next((str(page) for page in pages if page), None)
        what = f"{event}.{action}" if isinstance(action, str) else event
        firing = Firing(
            routine.name,
            "github",
            f"github:{delivery}",
            timestamp(service.clock.now()),
            f"GitHub {what} on {full_name}",
            link=link,
            fields=payload,
        )
        started = await service.fire(routine, firing)
        said.append(
            f"{routine.name}: {started.slug if isinstance(started, LaunchedRun) else started}"
        )
    return said
