"""Following the checks of tasks' pull requests: after each push, a follower per pull request
polls its checks (sooner when a webhook says they changed), keeps their state on the task,
says when it changed, and hands failed checks to a fix while the pull request has tries
left (``github.autoFixTries``). A follower ends once the checks passed or failed, or when
none reported for a while (the repository has none)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import replace

from harness.agents.task_desk import TaskDesk
from harness.config.forge_schema import GitHubSettings
from harness.errors import ForgeError, HarnessError
from harness.forge.checks import ChecksView
from harness.forge.webhook import ChecksReported
from harness.retry import Backoff
from harness.tasks.model import PullRequest, Task
from harness.tasks.store import TaskStore
from harness.waits import wait_set

logger = logging.getLogger(__name__)

# Checks still unreported this long after a push: the repository has none to wait for.
NO_CHECKS_AFTER_POLLS = 40
_LOOK = "look for pull requests"

ReadChecks = Callable[[Task, PullRequest], Awaitable[ChecksView | None]]


class CheckFollowers:
    """The followers of the pull requests' checks in this process, one per task."""

    def __init__(
        self,
        github: GitHubSettings,
        store: TaskStore,
        tasks: TaskDesk,
        *,
        read: ReadChecks,
        changed: Callable[[Task, PullRequest], None],
        failed: Callable[[Task, PullRequest, ForgeError], None],
        fix: Callable[[Task], Awaitable[None]],
    ) -> None:
        """``read``: the checks of a pushed pull request (None: no forge for it any more);
        ``changed``: their state changed (kept on the task already); ``failed``: the forge
        refused to say; ``fix``: failed checks to fix, with tries left."""
        self._github = github
        self._store = store
        self._tasks = tasks
        self._read, self._changed, self._failed, self._fix = read, changed, failed, fix
        self._followers: dict[str, asyncio.Task[None]] = {}
        self._wake: dict[str, asyncio.Event] = {}

    def follow(self, slug: str) -> None:
        """Follows the checks of ``slug``'s pull request afresh (after a push)."""
        if not self._github.follow_checks:
            return
        running = self._followers.pop(slug, None)
        if running is not None:
            running.cancel()
        follower = asyncio.create_task(self._follow_checks(slug), name=f"checks of {slug}")
        self._followers[slug] = follower
        follower.add_done_callback(lambda done: self._forget_follower(slug, done))

    def _forget_follower(self, slug: str, done: asyncio.Task[None]) -> None:
        if self._followers.get(slug) is done:
            del self._followers[slug]
        if not done.cancelled() and done.exception() is not None:
            logger.error("following the checks of %s failed", slug, exc_info=done.exception())

    async def _follow_checks(self, slug: str) -> None:
        poll = self._github.check_poll_seconds
        delays = Backoff(poll, poll * 4, factor=1.5).delays()
        polls = 0
        wake = self._wake.setdefault(slug, asyncio.Event())
        while True:
            await wait_set(wake, next(delays))  # a webhook delivery looks at once
            wake.clear()
            polls += 1
            task = await self._tasks.task(slug)
            pull = task.pull_request
            if pull is None or pull.head_commit is None:
                return
            try:
                view = await self._read(task, pull)
            except ForgeError as exc:
                logger.warning("checks of %s: %s", slug, exc.message)
                if exc.failure in ("rate-limited", "unavailable"):
                    continue
                self._failed(task, pull, exc)
                return
            if view is None or (view.state == "unknown" and polls >= NO_CHECKS_AFTER_POLLS):
                return
            if view.state != pull.checks:
                changed = replace(
                    pull, checks=view.state, failing=view.failing_names, checks_url=view.url
                )
                task = await self._store.set_pull_request(slug, changed)
                self._changed(task, changed)
                pull = changed
            if view.state == "failed":
                if pull.fix_tries < self._github.auto_fix_tries:
                    await self._fix(task)
                return
            if view.state == "passed":
                return

    async def checks_reported(self, reported: ChecksReported) -> list[str]:
        """A forge said checks changed (a webhook): the followers of the pull requests it
        names look now instead of at their next poll; their task slugs."""
        woken = []
        for slug, wake in self._wake.items():
            if slug not in self._followers:
                continue
            pull = (await self._tasks.task(slug)).pull_request
            if pull is None or pull.repository.lower() != reported.repository.lower():
                continue
            if pull.head_commit == reported.sha or pull.branch in reported.branches:
                wake.set()
                woken.append(slug)
        return woken

    async def follow_open_pull_requests(self) -> list[str]:
        """Follows the checks of the pull requests still waiting on them that nobody here
        follows yet (opened before a restart, or in another process); their task slugs."""
        started = []
        for task in await self._store.list():
            pull = task.pull_request
            waiting = pull is not None and pull.checks in ("unknown", "pending")
            if waiting and task.slug not in self._followers:
                self.follow(task.slug)
                started.append(task.slug)
        return started

    def keep_following_pull_requests(self, every: float = 60.0) -> asyncio.Task[None]:
        """For the bot (the replica holding its lease): follows the pull requests waiting on
        checks now, and looks for new ones every ``every`` s until the task returned ends."""

        async def look() -> None:
            while True:
                try:
                    await self.follow_open_pull_requests()
                except HarnessError as exc:  # the store unreadable for a moment
                    logger.warning("could not look for pull requests to follow: %s", exc)
                await asyncio.sleep(every)

        if (looking := self._followers.get(_LOOK)) is None or looking.done():
            looking = self._followers[_LOOK] = asyncio.create_task(look())
        return looking

    def cancel(self) -> list[asyncio.Task[None]]:
        """Cancels every follower; those to await."""
        followers = list(self._followers.values())
        for follower in followers:
            follower.cancel()
        return followers
