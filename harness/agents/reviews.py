"""Reviews of pull requests: a service of the core.

``start_review`` takes a pull request's address (of a configured repository), fetches its
detail, files and diff through the forge with the harness's credentials (nothing of GitHub's
reaches a sandbox), runs the ``reviewer`` role in a task whose worktree is the pull request's
head, checks the findings against the diff (``forge/reviews.py``) and posts them as one
GitHub review: as the person who asked when they linked their account, else as the bot.

One review per head (``review_records.py``): asking again for a head reviewed says where its
review is; a new push is a new head and gets its own. When posting fails, the findings stay
in the reviewer's task and asking again posts them without running it again.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from datetime import datetime
from typing import TYPE_CHECKING, Literal, Protocol

from harness.agents.dispatching import AgentHandle
from harness.agents.pull_requests import LinkedAccounts
from harness.agents.review_records import ReviewRecord, ReviewRecords
from harness.agents.task_desk import TaskDesk
from harness.clock import SYSTEM, Clock, timestamp
from harness.config.forge_schema import GitHubRepository
from harness.config.settings import Config, RepositorySettings
from harness.errors import AgentNotFoundError, ForgeError, TaskNotFoundError
from harness.forge.accounts import AccountStore
from harness.forge.github import AppTokens, GitHubRepo
from harness.forge.pull_head import branch_at_head
from harness.forge.reviews import (
    PullDetail,
    PullFile,
    PullRef,
    ReviewError,
    commentable_lines,
    draft_review,
    marks,
    parse_pull_url,
    read_findings,
    review_prompt,
    summary_line,
)
from harness.tasks.model import FINAL_STATUSES, DispatchRecord, ThreadRef, Trigger
from harness.workspaces import task_branch

if TYPE_CHECKING:
    import aiohttp

    from harness.agents.orchestrator import Orchestrator

logger = logging.getLogger(__name__)

REVIEWER_ROLE = "reviewer"
# A claim with no reviewer drafted this long: its process stopped before drafting one.
STALE_CLAIM_SECONDS = 600.0
REQUEST_TIMEOUT_SECONDS = 60

# Called once the reviewer is drafted (its task, its handle): a front end follows it there.
OnReviewer = Callable[[AgentHandle], Awaitable[None]]


class ReviewLifecycle(Protocol):
    """What reviews need of the agents' lifecycle (the orchestrator's)."""

    async def draft(
        self, role_name: str, prompt: str, *, task_slug: str | None = None,
        requested_by: str | None = None,
    ) -> AgentHandle: ...  # fmt: skip

    async def wait(self, agent_id: str, timeout: float | None = None) -> DispatchRecord: ...

    async def record(self, agent_id: str) -> DispatchRecord: ...


@dataclass(frozen=True)
class ReviewOutcome:
    """A review asked for: ``posted`` now, or ``already`` there for this head."""

    kind: Literal["posted", "already"]
    pull: PullRef
    head_sha: str
    url: str
    line: str  # the one line a thread gets
    task_slug: str | None = None


class Reviews:
    """Reviews of the pull requests of the configured repositories."""

    def __init__(
        self,
        config: Config,
        tasks: TaskDesk,
        lifecycle: ReviewLifecycle,
        *,
        accounts: LinkedAccounts | None = None,
        clock: Clock = SYSTEM,
    ) -> None:
        self._config = config
        self._tasks = tasks
        self._lifecycle = lifecycle
        self._accounts = accounts
        self._clock = clock
        self.records = ReviewRecords(config.tasks_dir)

    @classmethod
    def of(cls, orchestrator: Orchestrator) -> Reviews:
        """The reviews of ``orchestrator``'s repositories, tasks and agents."""
        accounts = AccountStore(orchestrator.config.tasks_dir)
        return cls(orchestrator.config, orchestrator.tasks, orchestrator,
                   accounts=accounts, clock=orchestrator.clock)  # fmt: skip

    def repository_of(self, url: str) -> tuple[PullRef, RepositorySettings]:
        """The pull request ``url`` names and its configured repository (ReviewError else)."""
        repos = self._config.workspaces.repositories
        known = {
            f"{repo.github.web_url}/{repo.github.full_name}".lower(): name
            for name, repo in repos.items()
            if repo.github is not None
        }
        pull, name = parse_pull_url(url, known)
        return pull, repos[name]

    async def start_review(
        self,
        url: str,
        *,
        requested_by: str | None,
        thread: ThreadRef | None = None,
        head_sha: str | None = None,
        on_reviewer: OnReviewer | None = None,
        trigger: Trigger | None = None,
    ) -> ReviewOutcome:
        """Reviews the pull request at ``url`` (once per head) and posts the review; where
        it is. ``requested_by``: the front end's user who asked (the review is theirs when
        they linked their GitHub account), None for the bot's own (a routine). ``thread``:
        the reviewer's task's thread. ``head_sha``: the head an event named; a review of it
        already there is found without asking GitHub. ``trigger``: the routine's firing that
        asked, recorded in the reviewer's task. HarnessError (ReviewError, ForgeError)
        says what stopped it; findings made are kept for the next ask."""
        pull, repo = self.repository_of(url)
        if head_sha:
            known = await self.records.find(str(pull), head_sha)
            if known is not None and known.state == "posted" and known.url:
                return self._already(pull, known)
        async with self._session() as session:
            token = await self._bot_token(repo, session)
            github = GitHubRepo(session, _github(repo), token, self._clock)
            detail = await github.pull_detail(pull.number)
            if detail.state != "open":
                raise ReviewError(f"pull request {pull} is {detail.state}",
                                  fix="ask for reviews of open pull requests")  # fmt: skip
            record = await self._claim(pull, detail, requested_by)
            if record.state == "posted" and record.url:
                return self._already(pull, record)
            try:
                files = await github.pull_files(pull.number)
                diff = await _diff(github, pull, files) if record.state == "running" else ""
            except BaseException:
                if record.state == "running":
                    await self.records.drop(record)
                raise
        if record.state == "running":
            record = await self._run(pull, repo, detail, files, diff, record, thread, token,
                                     on_reviewer, trigger)  # fmt: skip
        return await self._post(pull, repo, detail, files, record)

    # -- the steps -----------------------------------------------------------------------

    async def _claim(
        self, pull: PullRef, detail: PullDetail, requested_by: str | None
    ) -> ReviewRecord:
        """The head's record: a new claim (state running, no agent), or the one there."""
        mine = ReviewRecord(str(pull), detail.head_sha, "running", self._now(),
                            requested_by=requested_by)  # fmt: skip
        found = await self.records.claim(mine)
        if found is None:
            return mine
        if found.state != "running":
            return found
        if found.agent is None:
            age = (self._clock.now() - _parsed(found.at)).total_seconds()
            if age < STALE_CLAIM_SECONDS:
                raise self._under_way(pull, detail, found)
            return await self.records.save(mine)
        try:
            done = await self._lifecycle.record(found.agent)
        except (AgentNotFoundError, TaskNotFoundError):
            return await self.records.save(mine)
        if done.status not in FINAL_STATUSES:
            raise self._under_way(pull, detail, found)
        if done.status == "completed" and done.result is not None:
            return await self.records.save(replace(found, state="reviewed", at=self._now()))
        return await self.records.save(mine)

    async def _run(
        self, pull: PullRef, repo: RepositorySettings, detail: PullDetail,
        files: list[PullFile], diff: str, record: ReviewRecord, thread: ThreadRef | None,
        token: str, on_reviewer: OnReviewer | None, trigger: Trigger | None,
    ) -> ReviewRecord:  # fmt: skip
        """The reviewer, in a new task on the pull request's head, run to its end."""
        try:
            task = await self._tasks.create_task(
                f"Review {pull}: {detail.title[:200]}", thread, repo.name,
                requester=record.requested_by, trigger=trigger,
            )  # fmt: skip
            await branch_at_head(repo, detail, task_branch(task.slug), token=token)
            record = await self.records.save(replace(record, task=task.slug))
            handle = await self._lifecycle.draft(
                REVIEWER_ROLE, review_prompt(pull, detail, files, diff),
                task_slug=task.slug, requested_by=record.requested_by,
            )  # fmt: skip
        except BaseException:
            await self.records.drop(record)  # nothing to keep: the next ask starts afresh
            raise
        record = await self.records.save(replace(record, agent=handle.agent_id))
        logger.info("reviewing %s at %s: agent %s", pull, detail.head_sha[:12], handle.agent_id)
        if on_reviewer is not None:
            await on_reviewer(handle)
        done = await self._lifecycle.wait(handle.agent_id)
        if done.status != "completed" or done.result is None:
            await self.records.drop(record)
            raise ReviewError(
                f"the reviewer of {pull} ended {done.status} without findings"
                + (f": {done.error}" if done.error else ""),
                fix="ask for the review again",
            )
        return await self.records.save(replace(record, state="reviewed", at=self._now()))

    async def _post(
        self, pull: PullRef, repo: RepositorySettings, detail: PullDetail,
        files: list[PullFile], record: ReviewRecord,
    ) -> ReviewOutcome:  # fmt: skip
        """The reviewer's findings (kept in its task) posted as one review."""
        assert record.agent is not None
        result = (await self._lifecycle.record(record.agent)).result
        assert result is not None
        findings = read_findings(result.summary, result.issues)
        asked = record.requested_by
        linked = None
        if asked and self._accounts is not None:
            linked = await self._accounts.account(asked, _github(repo).api_url)
        for_person = f"{asked} (Slack)" if asked and linked is None else None
        lines = commentable_lines(files)
        draft = draft_review(findings, lines, head_sha=detail.head_sha, for_person=for_person)
        async with self._session() as session:
            token = linked.token if linked else await self._bot_token(repo, session)
            github = GitHubRepo(session, _github(repo), token, self._clock)
            # A post whose answer was lost is on GitHub already: found, not made twice.
            posted = [u for body, u in await github.review_urls(pull.number)
                      if marks(body, detail.head_sha)]  # fmt: skip
            url = posted[0] if posted else await github.post_review(
                pull.number, commit=detail.head_sha, body=draft.body,
                comments=[comment.to_json() for comment in draft.comments],
            )  # fmt: skip
        await self.records.save(replace(record, state="posted", url=url, at=self._now()))
        line = summary_line(pull, draft, url, as_login=linked.login if linked else "the bot")
        logger.info("%s", line)
        return ReviewOutcome("posted", pull, detail.head_sha, url, line, record.task)

    # -- helpers -------------------------------------------------------------------------

    def _already(self, pull: PullRef, record: ReviewRecord) -> ReviewOutcome:
        line = f"Already reviewed {pull} at {record.head[:12]}: {record.url}"
        return ReviewOutcome("already", pull, record.head, record.url or "", line, record.task)

    @staticmethod
    def _under_way(pull: PullRef, detail: PullDetail, record: ReviewRecord) -> ReviewError:
        where = f" in task {record.task}" if record.task else ""
        return ReviewError(
            f"a review of {pull} at {detail.head_sha[:12]} is under way{where}",
            fix="wait for it: its thread gets the review's link when it is posted",
        )

    async def _bot_token(self, repo: RepositorySettings, session: aiohttp.ClientSession) -> str:
        github = _github(repo)
        if github.app is not None:
            return await AppTokens(session, self._clock).token(github, github.app)
        token = os.environ.get(github.token_env, "")
        if not token:
            raise ForgeError(
                "credentials",
                f"no GitHub token for the bot: {github.token_env} is not set",
                fix=f"export {github.token_env} (a token that may read {github.full_name} and "
                "review its pull requests) where the bot runs, or configure a GitHub App",
            )
        return token

    @staticmethod
    def _session() -> aiohttp.ClientSession:
        import aiohttp

        return aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=REQUEST_TIMEOUT_SECONDS))

    def _now(self) -> str:
        return timestamp(self._clock.now())


async def _diff(github: GitHubRepo, pull: PullRef, files: list[PullFile]) -> str:
    """The pull request's diff; GitHub refuses one too large to show (406): its files'
    patches then stand in for it."""
    try:
        return await github.pull_diff(pull.number)
    except ForgeError as exc:
        if exc.status not in (406, 422):
            raise
    return "\n".join(f"--- {f.path}\n{f.patch or '(no patch shown)'}" for f in files)


def _github(repo: RepositorySettings) -> GitHubRepository:
    assert repo.github is not None  # repository_of finds only repositories with one
    return repo.github


def _parsed(at: str) -> datetime:
    try:
        return datetime.fromisoformat(at.replace("Z", "+00:00"))
    except ValueError:
        return datetime.fromtimestamp(0).astimezone()
