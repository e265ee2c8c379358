"""GitHub's REST API for one repository: pull requests, their check runs and job logs.

Through gidgethub on aiohttp, against the configured API base (github.com, GitHub
Enterprise, or a loopback fake in tests). Every refusal becomes one ``ForgeError`` saying
what happened and what to do; a rate limit that asks for a short wait is waited out once.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import gidgethub

from harness.clock import SYSTEM, Clock
from harness.config.forge_schema import GitHubAppSettings, GitHubRepository
from harness.errors import ForgeError
from harness.forge.reviews import PullDetail, PullFile
from harness.retry import Backoff, retrying

if TYPE_CHECKING:
    # aiohttp, gidgethub's client and its App tokens (jwt, cryptography) are imported where
    # GitHub is called: building an orchestrator (`harness run`) does not wait on them.
    import aiohttp

logger = logging.getLogger(__name__)

T = TypeVar("T")
USER_AGENT = "harness-slack-agents"
# A rate limit asking for a wait this short is waited out (once) instead of failing.
SHORT_WAIT_SECONDS = 10.0
# Only a rate limit is tried again, after the wait it asks for: no wait of the harness's own.
_NO_BACKOFF = Backoff(first=0.0, cap=0.0)
LOG_TAIL_CHARS = 12_000
DIFF_MEDIA_TYPE = "application/vnd.github.v3.diff"
# GitHub lists at most 3,000 files of a pull request, 100 a page.
_FILE_PAGES = 30


@dataclass(frozen=True)
class PullInfo:
    number: int
    url: str
    head_sha: str
    opened_by: str
    state: str = "open"


@dataclass(frozen=True)
class CheckRun:
    id: int
    name: str
    status: str  # queued, in_progress, completed
    conclusion: str | None  # success, failure, cancelled, timed_out, ... when completed
    url: str


def _pull(data: Mapping[str, Any]) -> PullInfo:
    return PullInfo(
        number=int(data["number"]),
        url=str(data["html_url"]),
        head_sha=str(data.get("head", {}).get("sha", "")),
        opened_by=str(data.get("user", {}).get("login", "")),
        state=str(data.get("state", "open")),
    )


def describe(
    exc: gidgethub.HTTPException, doing: str, repo: GitHubRepository, now: datetime
) -> ForgeError:
    """A GitHub refusal as what happened and the fix (pure): ``now`` is when it came, for
    the wait until a rate limit's reset."""
    status = int(exc.status_code)
    said = str(exc) or exc.status_code.phrase
    headers = {k.lower(): v for k, v in (exc.headers or {}).items()}
    where = f"{repo.full_name} on {repo.api_url}"
    retry_after = _retry_after(headers, now)
    if (
        isinstance(exc, gidgethub.RateLimitExceeded)
        or status == 429
        or (status == 403 and retry_after is not None)
    ):
        wait = f" for {retry_after:.0f} s" if retry_after is not None else ""
        return ForgeError(
            "rate-limited",
            f"GitHub's rate limit stopped {doing}{wait} ({said})",
            fix="try again in a while: nothing done so far is lost",
            status=status,
            retry_after=retry_after,
        )
    if status == 401:
        return ForgeError(
            "credentials",
            f"GitHub refused the credentials for {doing} ({said})",
            fix=f"set a valid token in {repo.token_env} (or link your account again with "
            "`/harness connect github`), then try again",
            status=status,
        )
    if status == 403:
        return ForgeError(
            "forbidden",
            f"GitHub did not allow {doing} in {where} ({said})",
            fix="give the token (or the App) write access to the repository's contents and "
            "pull requests, then try again",
            status=status,
        )
    if status == 404:
        return ForgeError(
            "not-found",
            f"GitHub has no repository {where} for this token ({said})",
            fix="check `github:` of the repository in config.yaml, and that the token can "
            "see the repository",
            status=status,
        )
    if status == 422:
        return ForgeError(
            "rejected",
            f"GitHub refused {doing}: {said}",
            fix="check that the branch was pushed and differs from the base branch",
            status=status,
        )
    if status >= 500:
        return ForgeError(
            "unavailable",
            f"GitHub failed while {doing} ({status} {said})",
            fix="try again in a minute: nothing done so far is lost",
            status=status,
        )
    return ForgeError("rejected", f"GitHub refused {doing} ({status} {said})", fix="try again",
                      status=status)  # fmt: skip


def _retry_after(headers: Mapping[str, str], now: datetime) -> float | None:
    value = headers.get("retry-after", "").strip()
    if value.isdigit():
        return float(value)
    if (
        headers.get("x-ratelimit-remaining") == "0"
        and headers.get("x-ratelimit-reset", "").isdigit()
    ):
        return max(0.0, float(headers["x-ratelimit-reset"]) - now.timestamp())
    return None


class GitHubRepo:
    """One repository on GitHub, as one identity (``token``); a rate limit's reset is
    measured from ``clock``'s time."""

    def __init__(
        self,
        session: aiohttp.ClientSession,
        repo: GitHubRepository,
        token: str,
        clock: Clock = SYSTEM,
    ) -> None:
        from gidgethub.aiohttp import GitHubAPI

        self.repo = repo
        self._clock = clock
        self._api = GitHubAPI(session, USER_AGENT, oauth_token=token, base_url=repo.api_url)
        self._path = f"/repos/{repo.full_name}"

    async def _call(self, doing: str, operation: Callable[[], Awaitable[T]]) -> T:
        import aiohttp

        def short_wait(exc: BaseException) -> float | None:
            """The wait a rate limit asks for, when short enough to wait out."""
            if not isinstance(exc, gidgethub.HTTPException):
                return None
            error = describe(exc, doing, self.repo, self._clock.now())
            wait = error.retry_after
            limited = error.failure == "rate-limited"
            return wait if limited and wait is not None and wait <= SHORT_WAIT_SECONDS else None

        def waiting(_exc: BaseException, delay: float) -> None:
            logger.info("GitHub asked to wait %.1f s before %s", delay, doing)

        try:
            return await retrying(
                operation,
                retry_on=gidgethub.HTTPException,
                retry_if=lambda exc: short_wait(exc) is not None,
                wait_hint=short_wait,
                backoff=_NO_BACKOFF,
                attempts=2,
                on_retry=waiting,
            )
        except gidgethub.HTTPException as exc:
            raise describe(exc, doing, self.repo, self._clock.now()) from exc
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise ForgeError(
                "unavailable",
                f"could not reach GitHub at {self.repo.api_url} while {doing}: {exc!r}",
                fix="check the network and `github.apiUrl`, then try again",
            ) from exc

    async def open_pull(
        self, *, title: str, body: str, head: str, base: str, draft: bool = False
    ) -> PullInfo:
        """The open pull request of ``head``, made now or found (its text then updated)."""
        found = await self.find_open_pull(head)
        if found is not None:
            await self.update_pull(found.number, title=title, body=body)
            return found
        data = {"title": title, "body": body, "head": head, "base": base, "draft": draft}
        made = await self._call(
            f"opening a pull request of {head}",
            lambda: self._api.post(f"{self._path}/pulls", data=data),
        )
        return _pull(made)

    async def find_open_pull(self, head: str) -> PullInfo | None:
        owner = self.repo.full_name.split("/")[0]
        url = f"{self._path}/pulls?state=open&head={owner}:{head}"

        async def first() -> Any:
            return await self._api.getitem(url)

        found = await self._call(f"looking for the pull request of {head}", first)
        return _pull(found[0]) if isinstance(found, list) and found else None

    async def pull(self, number: int) -> PullInfo:
        data = await self._call(
            f"reading pull request #{number}",
            lambda: self._api.getitem(f"{self._path}/pulls/{number}"),
        )
        return _pull(data)

    async def update_pull(self, number: int, *, title: str, body: str) -> None:
        await self._call(
            f"updating pull request #{number}",
            lambda: self._api.patch(
                f"{self._path}/pulls/{number}", data={"title": title, "body": body}
            ),
        )

    async def comment(self, number: int, body: str) -> None:
        await self._call(
            f"commenting on pull request #{number}",
            lambda: self._api.post(f"{self._path}/issues/{number}/comments", data={"body": body}),
        )

    async def pull_detail(self, number: int) -> PullDetail:
        """Pull request ``number`` with its head and base; ForgeError "not-found" when this
        identity sees no such pull request."""
        doing = f"reading pull request #{number}"
        try:
            data = await self._call(
                doing, lambda: self._api.getitem(f"{self._path}/pulls/{number}")
            )
        except ForgeError as exc:
            if exc.failure != "not-found":
                raise
            raise ForgeError(
                "not-found",
                f"{self.repo.full_name} has no pull request #{number} that the harness's "
                "GitHub identity can see",
                fix="check the pull request's address, and that the bot's token (or App) can "
                "read the repository",
                status=exc.status,
            ) from exc
        head, base = data.get("head") or {}, data.get("base") or {}
        return PullDetail(
            number=int(data["number"]),
            url=str(data.get("html_url", "")),
            title=str(data.get("title") or ""),
            body=str(data.get("body") or ""),
            state=str(data.get("state", "open")),
            head_sha=str(head.get("sha", "")),
            head_ref=str(head.get("ref", "")),
            head_repo=str((head.get("repo") or {}).get("full_name", "")),
            base_ref=str(base.get("ref", "")),
            base_sha=str(base.get("sha", "")),
            author=str((data.get("user") or {}).get("login", "")),
        )

    async def pull_files(self, number: int) -> list[PullFile]:
        """The files of pull request ``number``'s diff, with their patches."""
        files: list[PullFile] = []
        for page in range(1, _FILE_PAGES + 1):
            url = f"{self._path}/pulls/{number}/files?per_page=100&page={page}"

            async def listed(url: str = url) -> Any:
                return await self._api.getitem(url)

            data = await self._call(f"reading the files of pull request #{number}", listed)
            items = data if isinstance(data, list) else []
            files += [
                PullFile(str(item.get("filename", "")), str(item.get("status", "")),
                         item.get("patch") if isinstance(item.get("patch"), str) else None)
                for item in items if isinstance(item, dict)
            ]  # fmt: skip
            if len(items) < 100:
                break
        return files

    async def pull_diff(self, number: int) -> str:
        """Pull request ``number``'s diff, as text."""
        data = await self._call(
            f"reading the diff of pull request #{number}",
            lambda: self._api.getitem(f"{self._path}/pulls/{number}", accept=DIFF_MEDIA_TYPE),
        )
        return data if isinstance(data, str) else bytes(data).decode("utf-8", "replace")

    async def review_urls(self, number: int) -> list[tuple[str, str]]:
        """The reviews of pull request ``number``: (body, address) of each, oldest first."""
        data = await self._call(
            f"reading the reviews of pull request #{number}",
            lambda: self._api.getitem(f"{self._path}/pulls/{number}/reviews?per_page=100"),
        )
        items = data if isinstance(data, list) else []
        return [(str(r.get("body") or ""), str(r.get("html_url") or "")) for r in items]

    async def post_review(
        self, number: int, *, commit: str, body: str, comments: list[dict[str, Any]]
    ) -> str:
        """Posts one review (a comment, neither approving nor blocking) on the pull request
        at ``commit``; its address."""
        data = {"commit_id": commit, "body": body, "event": "COMMENT", "comments": comments}
        made = await self._call(
            f"posting a review on pull request #{number}",
            lambda: self._api.post(f"{self._path}/pulls/{number}/reviews", data=data),
        )
        return str(made.get("html_url") or "")

    async def check_runs(self, sha: str) -> list[CheckRun]:
        data = await self._call(
            f"reading the checks of {sha[:12]}",
            lambda: self._api.getitem(f"{self._path}/commits/{sha}/check-runs?per_page=100"),
        )
        runs = data.get("check_runs", []) if isinstance(data, dict) else []
        return [
            CheckRun(
                id=int(run["id"]),
                name=str(run.get("name", "")),
                status=str(run.get("status", "")),
                conclusion=run.get("conclusion"),
                url=str(run.get("html_url") or run.get("details_url") or ""),
            )
            for run in runs
        ]

    async def job_log(self, job_id: int) -> str:
        """The end of a job's log (GitHub redirects to the text; aiohttp follows)."""
        data = await self._call(
            f"reading the log of job {job_id}",
            lambda: self._api.getitem(f"{self._path}/actions/jobs/{job_id}/logs"),
        )
        text = (
            data
            if isinstance(data, str)
            else (data.decode("utf-8", "replace") if isinstance(data, bytes) else str(data))
        )
        return text[-LOG_TAIL_CHARS:]


class AppTokens:
    """Installation tokens of GitHub Apps, kept until shortly before they expire (by
    ``clock``'s wall time: GitHub says when, as a time of day)."""

    def __init__(self, session: aiohttp.ClientSession, clock: Clock = SYSTEM) -> None:
        self._session = session
        self._clock = clock
        self._tokens: dict[tuple[str, int, str], tuple[str, float]] = {}

    async def token(self, repo: GitHubRepository, app: GitHubAppSettings) -> str:
        key = (repo.api_url, app.app_id, repo.full_name if app.installation_id is None else "")
        kept = self._tokens.get(key)
        now = self._clock.now().timestamp()
        if kept is not None and kept[1] > now + 60:
            return kept[0]
        try:
            private_key = await asyncio.to_thread(Path(app.private_key_file).read_text, "utf-8")
        except OSError as exc:
            raise ForgeError(
                "credentials",
                f"cannot read the GitHub App's private key {app.private_key_file}: {exc.strerror}",
                fix="point `github.app.privateKeyFile` at the App's PEM key",
            ) from exc
        import aiohttp
        from gidgethub.aiohttp import GitHubAPI
        from gidgethub.apps import get_installation_access_token, get_jwt

        api = GitHubAPI(self._session, USER_AGENT, base_url=repo.api_url)
        doing = f"getting the GitHub App {app.app_id}'s token for {repo.full_name}"
        try:
            installation = app.installation_id
            if installation is None:
                jwt = get_jwt(app_id=str(app.app_id), private_key=private_key)
                found = await api.getitem(f"/repos/{repo.full_name}/installation", jwt=jwt)
                installation = int(found["id"])
            made = await get_installation_access_token(
                api,
                installation_id=str(installation),
                app_id=str(app.app_id),
                private_key=private_key,
            )
        except gidgethub.HTTPException as exc:
            raise describe(exc, doing, repo, self._clock.now()) from exc
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise ForgeError("unavailable", f"could not reach GitHub while {doing}: {exc!r}",
                             fix="check the network and `github.apiUrl`") from exc  # fmt: skip
        expires = _expiry(str(made.get("expires_at", "")), now)
        self._tokens[key] = (str(made["token"]), expires)
        return str(made["token"])


def _expiry(value: str, now: float) -> float:
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return now + 50 * 60  # GitHub's tokens last an hour
