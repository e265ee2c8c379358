"""Pull requests in the thread: the buttons act through the core's pull request service, and
its events are owed to the task's thread (views: ``bot/pull_request_views.py``).

A click on *Open pull request* (or *Try again*) or *Fix checks* is kept in the ledger before
it is acked (``bot/clicks.py``), and its answer in the thread settles it in the same step:
a bot stopped in between takes it up again at its next start. An open taken up again finds
the pull request GitHub may have opened already (by its branch) and records it; a fix taken
up again is not drafted twice when its developer had started (the thread hears how that
one ended instead)."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Coroutine
from functools import partial
from typing import Any, Literal

from bot.background import Background
from bot.clicks import ClickKind, Clicks, KeptClick, click_key, started_since
from bot.outbox import Outbox
from bot.poster import Poster
from bot.progress import AgentWatcher
from bot.pull_request_views import pull_request_message
from harness.agents.pull_requests import FIX_ROLE, PullRequestEvent, PullRequests
from harness.agents.task_desk import TaskDesk
from harness.errors import ForgeError, HarnessError
from harness.tasks.model import Task, ThreadRef

logger = logging.getLogger(__name__)

UNDER_WAY = "That is under way already; its answer comes in the thread."
SORRY = (
    "⚠️ Sorry, {doing} failed on my side; an admin can find why in the bot's log. "
    "Press the button again to retry."
)


def refusal(exc: HarnessError) -> str:
    return f"{exc.message}. {exc.fix}" if exc.fix else exc.message


class PullRequestThreads:
    def __init__(
        self,
        pull_requests: PullRequests,
        tasks: TaskDesk,
        poster: Poster,
        watcher: AgentWatcher,
        background: Background,
        outbox: Outbox,
        clicks: Clicks,
    ) -> None:
        self.pull_requests = pull_requests
        self.tasks = tasks
        self.poster = poster
        self.watcher = watcher
        self.background = background
        self.outbox = outbox
        self.clicks = clicks
        self._busy: set[str] = set()  # clicks whose work runs in this process now
        pull_requests.subscribe(self._on_event)
        # A pull request opened from the terminal or by an agent links its thread too.
        pull_requests.link_threads(poster.permalink)
        clicks.on("open", self._open)
        clicks.on("fix", self._resume_fix)

    async def _on_event(self, event: PullRequestEvent) -> None:
        thread, request = event.task.thread, event.request
        fixing = event.agent_id if event.kind == "fixing" else None
        message = pull_request_message(event) if thread is not None else None
        if thread is not None and message is not None:
            # The answer to a click settles it in the same step: said once, across restarts.
            settles = None if fixing else request  # a fix's agent watch settles it
            await self.outbox.owe(thread, [{"op": "post", "message": message}], handles=settles)
        elif request is not None and not fixing:
            await self.clicks.settle(request)
        if fixing:
            self.background.spawn(self._follow(event, fixing), name=f"fix {fixing}")

    async def _follow(self, event: PullRequestEvent, agent_id: str) -> None:
        task = event.task
        if task.thread is None:
            if event.request is not None:
                await self.clicks.settle(event.request)
            return
        try:
            await self.watcher.follow(
                task.thread, agent_id, "developer", task_slug=task.slug,
                drafted_by="failed checks", recipient=task.requester, handles=event.request,
            )  # fmt: skip
        except Exception:  # the top of this agent's thread view
            logger.exception("showing the fixing agent %s in %s failed", agent_id, task.thread)

    async def _task_here(
        self, thread: ThreadRef, slug: str, user: str, action: Literal["open", "fix"]
    ) -> Task | str:
        try:
            task = await self.tasks.task(slug)
            if task.thread != thread:
                return "This button belongs to another thread's task."
            return await self.pull_requests.authorize(slug, user, action)
        except HarnessError as exc:
            return refusal(exc)

    async def _take(
        self,
        kind: ClickKind,
        thread: ThreadRef,
        slug: str,
        user: str,
        work: Callable[[KeptClick], Coroutine[Any, Any, None]],
    ) -> str | None:
        """Checks the click, keeps it, and starts its work: why not (None once kept)."""
        task = await self._task_here(thread, slug, user, kind if kind == "open" else "fix")
        if isinstance(task, str):
            return task
        key = click_key(kind, slug)
        if key in self._busy:
            return UNDER_WAY
        self._busy.add(key)  # from now on a second click is the same one
        refused = await self.clicks.take(kind, slug, user, thread)
        if refused is not None:
            self._busy.discard(key)
            return refused
        now = self.clicks.ledger.clock.now().timestamp()
        self.background.spawn(
            work(KeptClick(key, kind, slug, user, thread, now)), name=f"{kind} {slug}"
        )
        return None

    async def open(self, thread: ThreadRef, slug: str, user: str, _body: object) -> str | None:
        """The *Open pull request* (or *Try again*) button: why not, or None once taken on."""
        return await self._take("open", thread, slug, user, self._open)

    async def fix(self, thread: ThreadRef, slug: str, user: str, _body: object) -> str | None:
        """The *Fix checks* button: why not, or None once taken on."""
        return await self._take("fix", thread, slug, user, self._fix)

    async def _open(self, click: KeptClick) -> None:
        """Opens the pull request (also one taken up after a restart: the open one of the
        branch is found, not opened again); its event answers in the thread."""

        async def open_it() -> None:
            link = await self.poster.permalink(click.thread)
            await self.pull_requests.open_pull_request(
                click.subject, by=click.user, thread_url=link, request=click.key
            )

        # A forge's failure is said in the thread by its "failed" event, which settles it.
        await self._carry_out(click, "opening the pull request", open_it, told=(ForgeError,))

    async def _fix(self, click: KeptClick) -> None:
        fix = partial(self.pull_requests.fix_checks, click.subject, by=click.user,
                      request=click.key)  # fmt: skip
        await self._carry_out(click, "fixing the checks", fix)

    async def _carry_out(
        self,
        click: KeptClick,
        doing: str,
        work: Callable[[], Awaitable[object]],
        *,
        told: tuple[type[HarnessError], ...] = (),
    ) -> None:
        """Runs a click's work and answers its failure: one of ``told`` is said in the
        thread already; another of the harness's (not theirs to do, or not any more) to the
        person alone; anything else is logged, and the thread hears it failed."""
        self._busy.add(click.key)
        try:
            await work()
        except told:
            return
        except HarnessError as exc:
            await self._refuse(click, refusal(exc))
        except Exception:  # the top of a click's work: the thread must hear back
            logger.exception("%s of %s failed", doing, click.subject)
            await self._sorry(click, doing)
        finally:
            self._busy.discard(click.key)

    async def _resume_fix(self, click: KeptClick) -> None:
        """A fix taken up after a restart: drafted now, unless its developer had started
        (its end, or its interruption, is said in the thread by the watcher)."""
        try:
            task = await self.tasks.task(click.subject)
        except HarnessError as exc:
            await self._refuse(click, refusal(exc))
            return
        if started_since(task.dispatches, FIX_ROLE, click.at):
            await self.clicks.settle(click.key)
            return
        await self._fix(click)

    async def _refuse(self, click: KeptClick, text: str) -> None:
        thread = click.thread
        await self.poster.ephemeral(thread.channel, click.user, text, thread.thread_ts)
        await self.clicks.settle(click.key)

    async def _sorry(self, click: KeptClick, doing: str) -> None:
        message = SORRY.format(doing=doing)
        await self.outbox.owe(click.thread, [{"op": "post", "message": message}], handles=click.key)
