"""Pull requests in the thread: the buttons act through the core's pull request service, and
its events are posted into the task's thread (views: ``bot/pull_request_views.py``)."""

from __future__ import annotations

import logging

from bot.background import Background
from bot.poster import Poster
from bot.progress import AgentWatcher
from bot.pull_request_views import pull_request_message
from harness.agents.pull_requests import PullRequestEvent, PullRequests
from harness.agents.task_desk import TaskDesk
from harness.errors import ForgeError, HarnessError
from harness.tasks.model import Task, ThreadRef

logger = logging.getLogger(__name__)


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
    ) -> None:
        self.pull_requests = pull_requests
        self.tasks = tasks
        self.poster = poster
        self.watcher = watcher
        self.background = background
        pull_requests.subscribe(self._on_event)
        # A pull request opened from the terminal or by an agent links its thread too.
        pull_requests.link_threads(poster.permalink)

    async def _on_event(self, event: PullRequestEvent) -> None:
        thread = event.task.thread
        if thread is None:
            return
        message = pull_request_message(event)
        if message is not None:
            await self.poster.post(thread, message, attempts=4)
        if event.kind == "fixing" and event.agent_id:
            self.background.spawn(
                self._follow(thread, event.task, event.agent_id), name=f"fix {event.agent_id}"
            )

    async def _follow(self, thread: ThreadRef, task: Task, agent_id: str) -> None:
        try:
            await self.watcher.follow(
                thread, agent_id, "developer", task_slug=task.slug,
                drafted_by="failed checks", recipient=task.requester,
            )  # fmt: skip
        except Exception:  # the top of this agent's thread view
            logger.exception("showing the fixing agent %s in %s failed", agent_id, thread)

    async def _task_here(self, thread: ThreadRef, slug: str) -> Task | str:
        try:
            task = await self.tasks.task(slug)
        except HarnessError as exc:
            return refusal(exc)
        if task.thread != thread:
            return "This button belongs to another thread's task."
        return task

    async def open(self, thread: ThreadRef, slug: str, user: str, _body: object) -> str | None:
        """The *Open pull request* (or *Try again*) button: why not, or None once asked."""
        task = await self._task_here(thread, slug)
        if isinstance(task, str):
            return task
        link = await self.poster.permalink(thread)
        self.background.spawn(self._open(task, user, link), name=f"pull request {slug}")
        return None

    async def _open(self, task: Task, user: str, link: str | None) -> None:
        try:
            await self.pull_requests.open_pull_request(task.slug, by=user, thread_url=link)
        except ForgeError:
            return  # said in the thread by its "failed" event
        except HarnessError as exc:  # not theirs to open: said to them alone
            if task.thread is not None:
                await self.poster.ephemeral(
                    task.thread.channel, user, refusal(exc), task.thread.thread_ts
                )

    async def fix(self, thread: ThreadRef, slug: str, user: str, _body: object) -> str | None:
        """The *Fix checks* button."""
        task = await self._task_here(thread, slug)
        if isinstance(task, str):
            return task
        try:
            await self.pull_requests.fix_checks(slug, by=user)
        except HarnessError as exc:
            return refusal(exc)
        return None
