"""Pull requests of tasks: a service of the core.

Opening one pushes the task's branch with the harness's credentials (never from inside a
sandbox) and opens (or updates) the pull request, as the person who asked when they linked
their GitHub account, else as the bot. The pull request's checks are then followed; failed
checks are fixed by a developer drafted on the same branch (a click, or without one up to
``github.autoFixTries``), and every writer that finishes on the task later pushes again.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Literal, Protocol

from harness.agents.authority import Authority
from harness.agents.check_followers import CheckFollowers
from harness.agents.events import AgentEvent, Events
from harness.agents.task_desk import TaskDesk
from harness.clock import SYSTEM, Clock
from harness.config.settings import Config, RepositorySettings
from harness.errors import ForgeError, HarnessError
from harness.forge.accounts import LinkedAccount
from harness.forge.checks import ChecksView, fix_prompt, summarize
from harness.forge.github import AppTokens, GitHubRepo
from harness.forge.push import push_branch
from harness.forge.text import pull_request_body, pull_request_title
from harness.forge.webhook import ChecksReported
from harness.tasks.model import PullRequest, Task, ThreadRef
from harness.tasks.store import TaskStore

if TYPE_CHECKING:
    import aiohttp  # imported when GitHub is called: an orchestrator is built without it

    from harness.agents.dispatching import AgentHandle

logger = logging.getLogger(__name__)

PullRequestEventKind = Literal["opened", "updated", "checks", "fixing", "failed"]
FIX_ROLE = "developer"


@dataclass(frozen=True)
class PullRequestEvent:
    """What happened to a task's pull request, for the front ends: opened, updated (pushed
    again), checks (their state changed), fixing (a developer was drafted for failed
    checks: ``agent_id``), failed (something could not be done: ``error``). ``request``:
    the front end's record of the click this answers, settled with the answer."""

    kind: PullRequestEventKind
    task: Task
    pull_request: PullRequest | None
    agent_id: str | None = None
    error: ForgeError | None = None
    request: str | None = None


PullRequestListener = Callable[[PullRequestEvent], Awaitable[None] | None]
ThreadLink = Callable[[ThreadRef], Awaitable[str | None]]


class LinkedAccounts(Protocol):
    """People's own forge accounts, linked from a front end."""

    async def account(self, user: str, api_url: str) -> LinkedAccount | None: ...


class Drafter(Protocol):
    """Drafts an agent (the orchestrator's ``draft``): a fix of failed checks is one."""

    async def __call__(
        self, role_name: str, prompt: str, *, task_slug: str | None = None,
        requested_by: str | None = None,
    ) -> AgentHandle: ...  # fmt: skip


class PullRequests:
    """Opens, updates and follows the pull requests of tasks; pushes a writer's work there."""

    def __init__(
        self,
        config: Config,
        store: TaskStore,
        tasks: TaskDesk,
        authority: Authority,
        agent_events: Events[AgentEvent],
        draft: Drafter,
        *,
        accounts: LinkedAccounts | None = None,
        clock: Clock = SYSTEM,
    ) -> None:
        self._config = config
        self._store = store
        self._tasks = tasks
        self._clock = clock  # GitHub's rate-limit waits and App tokens' expiry
        self._authority = authority
        self._draft = draft
        self._linked_accounts = accounts
        self._events = Events[PullRequestEvent]()
        self._locks: dict[str, asyncio.Lock] = {}
        self._pushes: dict[str, asyncio.Task[None]] = {}  # "slug:agent id" -> its push
        self._session_open: aiohttp.ClientSession | None = None
        self._app_tokens_cache: AppTokens | None = None
        self._thread_link: ThreadLink | None = None
        self._checks = CheckFollowers(
            config.github, store, tasks, read=self._read_checks, changed=self._checks_changed,
            failed=self._checks_unread, fix=self._fix_quietly,
        )  # fmt: skip
        # A writer that ends on a task with a pull request: its commits go there too.
        agent_events.subscribe(self._on_agent_event)

    def subscribe(self, listener: PullRequestListener) -> None:
        self._events.subscribe(listener)

    def link_threads(self, link: ThreadLink) -> None:
        """How a front end links a task's thread (a pull request's body points at it)."""
        self._thread_link = link

    def forge_of(self, task: Task) -> RepositorySettings | None:
        """The task's repository when pull requests can be opened for it."""
        repo = self._config.workspaces.repositories.get((task.repository or "").lower())
        return repo if repo is not None and repo.github is not None else None

    async def authorize(self, slug: str, by: str, action: Literal["open", "fix"]) -> Task:
        """The task, when ``by`` may open its pull request ("open") or fix its failed checks
        ("fix") now; else the HarnessError saying why (asked before a click is taken on)."""
        task = await self._tasks.task(slug)
        doing = "open a pull request for" if action == "open" else "fix the checks of"
        self._authority.check(by, task.requester, f"{doing} task {slug}")
        if action == "fix":
            _failed_pull(task)
        return task

    async def open_pull_request(
        self, slug: str, *, by: str | None, thread_url: str | None = None,
        request: str | None = None,
    ) -> PullRequest:  # fmt: skip
        """Push the task's branch and open its pull request (or update the open one: found by
        its branch, never opened twice), as ``by`` when they linked their account, else as
        the bot. ``by`` None: the terminal's own user. ForgeError / NotAllowedError say what
        stopped it; what was done (a push) stays done, and trying again goes on from there."""
        task = await self._tasks.task(slug)
        if by is not None:
            self._authority.check(by, task.requester, f"open a pull request for task {slug}")
        async with self._lock(slug):
            try:
                pull = await self._open(task, by, thread_url)
            except ForgeError as exc:
                self._emit(PullRequestEvent("failed", task, task.pull_request, None, exc, request))
                raise
        task = await self._tasks.task(slug)
        self._emit(PullRequestEvent("opened", task, pull, request=request))
        self._checks.follow(slug)
        return pull

    async def fix_checks(self, slug: str, *, by: str | None, request: str | None = None) -> str:
        """Draft a developer on the task's branch with the failing checks' logs; its agent
        id. Its commits are pushed to the pull request when it ends."""
        task = await self._tasks.task(slug)
        if by is not None:
            self._authority.check(by, task.requester, f"fix the checks of task {slug}")
        return await self._fix(task, by or task.requester, request)

    # -- the steps -----------------------------------------------------------------------

    async def _open(self, task: Task, by: str | None, thread_url: str | None) -> PullRequest:
        repo = self.forge_or_error(task)
        assert repo.github is not None
        branch = f"harness/{task.slug}"
        bot_token = await self._bot_token(repo)
        head = await push_branch(repo, branch, token=bot_token)
        asked = by or task.requester
        if thread_url is None and task.thread is not None and self._thread_link is not None:
            thread_url = await self._thread_link(task.thread)
        linked = await self._account(asked, repo) if asked else None
        token = linked.token if linked else bot_token
        body = pull_request_body(
            task,
            thread_url=thread_url,
            asked_by=asked,
            opened_for=asked if linked is None and asked else None,
        )
        info = await self._github(repo, token).open_pull(
            title=pull_request_title(task), body=body, head=branch,
            base=repo.base_branch, draft=self._config.github.draft,
        )  # fmt: skip
        previous = task.pull_request
        pull = PullRequest(
            repository=repo.github.full_name,
            number=info.number,
            url=info.url,
            branch=branch,
            base=repo.base_branch,
            opened_by=info.opened_by or (linked.login if linked else "the bot"),
            requested_by=asked,
            head_commit=head,
            checks="unknown",
            fix_tries=previous.fix_tries if previous and previous.number == info.number else 0,
        )
        await self._store.set_pull_request(task.slug, pull)
        return pull

    async def _push_again(self, slug: str) -> None:
        """A writer finished on a task with a pull request: its commits go there too."""
        async with self._lock(slug):
            task = await self._tasks.task(slug)
            pull, repo = task.pull_request, self.forge_of(task)
            if pull is None or repo is None:
                return
            try:
                head = await push_branch(repo, pull.branch, token=await self._bot_token(repo))
            except ForgeError as exc:
                self._emit(PullRequestEvent("failed", task, pull, error=exc))
                return
            if head == pull.head_commit:
                return
            pull = replace(pull, head_commit=head, checks="unknown", failing=(), checks_url=None)
            task = await self._store.set_pull_request(slug, pull)
        self._emit(PullRequestEvent("updated", task, pull))
        self._checks.follow(slug)

    async def _fix(self, task: Task, requested_by: str | None, request: str | None = None) -> str:
        pull, repo = _failed_pull(task), self.forge_or_error(task)
        github = self._github(repo, await self._bot_token(repo))
        failing = summarize(await github.check_runs(pull.head_commit or pull.branch)).failing
        logs = [(run, await self._log(github, run.id)) for run in failing]
        handle = await self._draft(
            FIX_ROLE,
            fix_prompt(pull.number, pull.url, logs),
            task_slug=task.slug,
            requested_by=requested_by,
        )
        pull = replace(pull, fix_tries=pull.fix_tries + 1)
        task = await self._store.set_pull_request(task.slug, pull)
        self._emit(PullRequestEvent("fixing", task, pull, handle.agent_id, request=request))
        return handle.agent_id

    @staticmethod
    async def _log(github: GitHubRepo, job_id: int) -> str:
        try:
            return await github.job_log(job_id)
        except ForgeError as exc:  # a check that is not an Actions job has no log here
            return f"(no log: {exc.message})"

    # -- following checks ----------------------------------------------------------------

    async def _read_checks(self, task: Task, pull: PullRequest) -> ChecksView | None:
        repo = self.forge_of(task)
        if repo is None or pull.head_commit is None:
            return None
        github = self._github(repo, await self._bot_token(repo))
        return summarize(await github.check_runs(pull.head_commit))

    def _checks_changed(self, task: Task, pull: PullRequest) -> None:
        self._emit(PullRequestEvent("checks", task, pull))

    def _checks_unread(self, task: Task, pull: PullRequest, error: ForgeError) -> None:
        self._emit(PullRequestEvent("failed", task, pull, error=error))

    async def _fix_quietly(self, task: Task) -> None:
        try:
            await self._fix(task, task.requester)
        except HarnessError as exc:
            logger.warning("no automatic fix of %s's checks: %s", task.slug, exc.message)
            error = exc if isinstance(exc, ForgeError) else None
            self._emit(PullRequestEvent("failed", task, task.pull_request, error=error))

    def _on_agent_event(self, event: AgentEvent) -> None:
        """A writer that finished on a task with a pull request: push its work there."""
        record = event.record
        if event.kind != "finished" or event.task.pull_request is None:
            return
        if record.status != "completed" or not record.head_commit:
            return
        if record.head_commit == event.task.pull_request.head_commit:
            return
        follow_up = asyncio.create_task(self._push_again(event.task.slug))
        self._pushes.setdefault(f"{event.task.slug}:{record.agent_id}", follow_up)
        follow_up.add_done_callback(
            lambda done: self._pushes.pop(f"{event.task.slug}:{record.agent_id}", None)
        )

    async def checks_reported(self, reported: ChecksReported) -> list[str]:
        """A forge said checks changed (a webhook): the followers of the pull requests it
        names look now instead of at their next poll; their task slugs."""
        return await self._checks.checks_reported(reported)

    async def follow_open_pull_requests(self) -> list[str]:
        """Follows the checks of the pull requests still waiting on them that nobody here
        follows yet (opened before a restart, or in another process); their task slugs."""
        return await self._checks.follow_open_pull_requests()

    def keep_following_pull_requests(self, every: float = 60.0) -> asyncio.Task[None]:
        """For the bot (the replica holding its lease): follows the pull requests waiting on
        checks now, and looks for new ones every ``every`` s until the task returned ends."""
        return self._checks.keep_following_pull_requests(every)

    async def close(self) -> None:
        pushes = list(self._pushes.values())
        for push in pushes:
            push.cancel()
        for follower in [*pushes, *self._checks.cancel()]:
            with contextlib.suppress(asyncio.CancelledError):
                await follower
        if self._session_open is not None:
            await self._session_open.close()

    # -- identities ----------------------------------------------------------------------

    def forge_or_error(self, task: Task) -> RepositorySettings:
        """The task's repository with its forge; ForgeError saying why there is none."""
        if task.repository is None:
            raise ForgeError(
                "no-branch",
                f"task {task.slug} has no repository: its agents worked in a scratch folder",
                fix="ask in a thread that names a repository (`repo:NAME`) to get a branch",
            )
        repo = self.forge_of(task)
        if repo is None:
            raise ForgeError(
                "no-forge",
                f"repository {task.repository} has no forge to open pull requests on",
                fix=f"add `github: OWNER/NAME` under workspaces.repositories.{task.repository} "
                "in config.yaml",
            )
        return repo

    async def _bot_token(self, repo: RepositorySettings) -> str:
        github = repo.github
        assert github is not None
        if github.app is not None:
            return await self._app_tokens().token(github, github.app)
        token = os.environ.get(github.token_env, "")
        if not token:
            raise ForgeError(
                "credentials",
                f"no GitHub token for the bot: {github.token_env} is not set",
                fix=f"export {github.token_env} (a token that may push and open pull requests "
                f"in {github.full_name}) where the bot runs, or configure a GitHub App",
            )
        return token

    async def _account(self, user: str, repo: RepositorySettings) -> LinkedAccount | None:
        if self._linked_accounts is None or repo.github is None:
            return None
        return await self._linked_accounts.account(user, repo.github.api_url)

    def _session(self) -> aiohttp.ClientSession:
        import aiohttp

        if self._session_open is None or self._session_open.closed:
            self._session_open = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=60))
        return self._session_open

    def _app_tokens(self) -> AppTokens:
        if self._app_tokens_cache is None:
            self._app_tokens_cache = AppTokens(self._session(), self._clock)
        return self._app_tokens_cache

    def _github(self, repo: RepositorySettings, token: str) -> GitHubRepo:
        assert repo.github is not None
        return GitHubRepo(self._session(), repo.github, token, self._clock)

    def _lock(self, slug: str) -> asyncio.Lock:
        return self._locks.setdefault(slug, asyncio.Lock())

    def _emit(self, event: PullRequestEvent) -> None:
        self._events.emit(event)


def _failed_pull(task: Task) -> PullRequest:
    pull = task.pull_request
    if pull is None or pull.checks != "failed":
        raise HarnessError(
            f"task {task.slug} has no pull request with failed checks",
            fix="open its pull request first, and wait for its checks",
        )
    return pull
