"""A loopback fake of GitHub's REST API (v3) and of the OAuth device flow of its web host.

Tests (and demos) point the forge client at `FakeGitHub.api_url`. What it serves: `GET /user`,
`GET /repos/{o}/{r}`, pull requests (create, list, get, update), issue comments, check runs of
a commit, job logs (a 302 to a plain-text URL on the same server, as GitHub redirects to its
storage host; aiohttp follows it, so gidgethub's `getitem` returns the log text), GitHub App
installations and their tokens (`fake_github_auth`), and `POST /login/device/code` and
`/login/oauth/access_token`. Branches and shas come from real bare repositories that tests push
to with `git push`. Every request is recorded; `fail_next` injects errors; `hold_next` keeps
an answer (its work done, e.g. the pull request made) until the test releases it.

How gidgethub 6 surfaces error answers (`gidgethub.sansio.decipher_response`): 401 and 404 as
`BadRequest`; a 403 with `x-ratelimit-remaining: 0` as `RateLimitExceeded` (`.rate_limit`);
a 429 as plain `BadRequest` (the Retry-After is in `.headers`); a 422 as `InvalidField` when an
error's code is missing/missing_field/invalid/already_exists, else `ValidationError` (`.errors`
holds the list); 5xx as `GitHubBroken`. All are `HTTPException`s: `.status_code` (an
`http.HTTPStatus`), `.headers` (the response's), and `str(exc)` is the body's `message`.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import re
import secrets
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import replace
from pathlib import Path
from typing import Any, Self

from aiohttp import web

from harness.testing.fake_github_auth import (
    App,
    Credential,
    Credentials,
    add_auth_routes,
    bearer,
)
from harness.testing.fake_github_model import (
    BODY,
    JSON,
    ApiError,
    CheckRun,
    Fault,
    PullRequest,
    RecordedRequest,
    Repository,
    StoredRun,
    iso,
    parse_body,
    reason,
)
from harness.testing.fake_github_reviews import add_review_routes
from harness.testing.fake_github_routes import add_api_routes

__all__ = ["CheckRun", "FakeGitHub", "Hold", "PullRequest", "RecordedRequest"]

logger = logging.getLogger(__name__)
_RATE_LIMIT = 5000


class Hold:
    """An answer kept back: ``reached`` is set once its request was handled (its effect made)
    and recorded, and the answer goes out at ``release``."""

    def __init__(self, method: str, pattern: re.Pattern[str]) -> None:
        self.method = method
        self.pattern = pattern
        self.reached = asyncio.Event()
        self.released = asyncio.Event()
        self.request: RecordedRequest | None = None

    def matches(self, method: str, path: str) -> bool:
        return self.method in ("*", method) and self.pattern.fullmatch(path) is not None

    def release(self) -> None:
        self.released.set()


class FakeGitHub:
    """GitHub on 127.0.0.1 (an ephemeral port by default); an async context manager.

    `api_prefix` serves the API under a path, as GitHub Enterprise does (`/api/v3`); the web
    routes (OAuth, html_url pages) stay at the root, `web_url`."""

    def __init__(
        self,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        api_prefix: str = "",
        device_interval: int = 5,
        device_expires_in: int = 900,
    ) -> None:
        self._host = host
        self._port = port
        self._prefix = api_prefix.rstrip("/")
        self.credentials = Credentials(
            device_interval=device_interval, device_expires_in=device_expires_in
        )
        self.repos: dict[str, Repository] = {}
        self.pull_requests: dict[str, list[PullRequest]] = {}
        self.issue_comments: dict[tuple[str, int], list[JSON]] = {}
        self.check_runs: dict[tuple[str, str], list[StoredRun]] = {}
        self.job_logs: dict[int, tuple[str, str]] = {}  # job id -> (URL secret, log text)
        self.reviews: dict[tuple[str, int], list[JSON]] = {}  # (repo, number) -> reviews
        self._ids = itertools.count(1)
        self._stable_ids: dict[str, int] = {}
        self._requests: list[RecordedRequest] = []
        self._faults: list[Fault] = []
        self._holds: list[Hold] = []
        self._used: dict[str, int] = {}
        self._reset = int(time.time()) + 3600
        self._changed: asyncio.Condition | None = None
        self._runner: web.AppRunner | None = None
        self._base_url: str | None = None

    # ---- lifecycle

    async def start(self) -> Self:
        if self._runner is not None:
            raise RuntimeError("FakeGitHub already started")
        self._changed = asyncio.Condition()
        app = web.Application(middlewares=[self._middleware])
        add_auth_routes(app, self.credentials, self._prefix, lambda: self.web_url)
        add_api_routes(app, self, self._prefix)
        add_review_routes(app, self, self._prefix)
        app.router.add_get("/_fake/logs/{job:\\d+}/{secret}", self._serve_log)
        runner = web.AppRunner(app, access_log=None, shutdown_timeout=1.0)
        await runner.setup()
        try:
            await web.TCPSite(runner, self._host, self._port).start()
        except BaseException:
            await runner.cleanup()
            raise
        self._runner = runner
        host, port = runner.addresses[0][:2]
        self._base_url = f"http://{host}:{port}"
        logger.debug("fake GitHub listening on %s", self._base_url)
        return self

    async def stop(self) -> None:
        for hold in self._holds:  # nobody will release them now
            hold.release()
        runner, self._runner = self._runner, None
        if runner is not None:
            await runner.cleanup()

    async def __aenter__(self) -> Self:
        return await self.start()

    async def __aexit__(self, *exc_info: object) -> None:
        await self.stop()

    @property
    def web_url(self) -> str:
        """Where html_urls point and the OAuth device flow is served (github.com's part)."""
        if self._base_url is None:
            raise RuntimeError("FakeGitHub is not started")
        return self._base_url

    @property
    def api_url(self) -> str:
        """The REST API's base URL (api.github.com's part): `base_url` for gidgethub."""
        return self.web_url + self._prefix

    # ---- control: accounts and repositories

    def add_token(self, token: str, login: str, scopes: Iterable[str] = ("repo",)) -> None:
        self.credentials.tokens[token] = Credential(login, tuple(scopes))

    def add_repository(
        self,
        full_name: str,
        *,
        bare: Path | None = None,
        default_branch: str = "main",
        collaborators: set[str] | None = None,
    ) -> None:
        """A private repository. `bare`: a local bare repository whose branches the fake reads
        with `git` (without one, `set_branch` sets the branch tips). `collaborators`: the logins
        with push access (its owner too); None: every login."""
        repo = Repository(full_name, bare, default_branch, collaborators)
        self.repos[full_name.lower()] = repo
        self.pull_requests.setdefault(full_name.lower(), [])

    def set_branch(self, full_name: str, branch: str, sha: str) -> None:
        """A branch tip of a repository added without a bare repository."""
        self.repository(full_name).branches[branch] = sha

    async def branch_sha(self, full_name: str, branch: str) -> str | None:
        """The sha `branch` points at now (None: no such branch)."""
        return await self.repository(full_name).branch_sha(branch)

    def add_app(
        self,
        app_id: int,
        public_key_pem: str | bytes,
        installations: dict[int, set[str]],
        *,
        slug: str = "harness-app",
    ) -> None:
        """A GitHub App; its installation tokens act as `<slug>[bot]` on the installations'
        repositories (`installations`: installation id -> full names)."""
        self.credentials.apps[app_id] = App(app_id, public_key_pem, installations, slug)

    def add_oauth_app(self, client_id: str) -> None:
        self.credentials.oauth_clients.add(client_id)

    def approve_device(self, user_code: str, login: str) -> str:
        """The person approves the device code `user_code` as `login`: returns the token the
        next poll hands out (already valid on the API)."""
        return self.credentials.approve(user_code, login)

    def deny_device(self, user_code: str) -> None:
        self.credentials.deny(user_code)

    def expire_device(self, user_code: str) -> None:
        self.credentials.expire(user_code)

    @property
    def device_interval(self) -> int:
        return self.credentials.device_interval

    @device_interval.setter
    def device_interval(self, seconds: int) -> None:
        self.credentials.device_interval = seconds

    # ---- control: checks, faults

    def set_check_runs(self, full_name: str, sha: str, runs: Iterable[CheckRun]) -> list[int]:
        """The check runs of commit `sha` from now on; returns their ids (their jobs' ids too).
        A run keeps its id across calls while its name stays (as a job going from queued to
        completed does)."""
        key = (self.repository(full_name).full_name.lower(), sha)
        before = {stored.run.name: stored for stored in self.check_runs.get(key, [])}
        stored_runs: list[StoredRun] = []
        for run in runs:
            old = before.get(run.name)
            run_id = old.id if old is not None else next(self._ids)
            started = old.started_at if old is not None and old.started_at else None
            if run.status != "queued" and started is None:
                started = iso()
            completed = iso() if run.status == "completed" else None
            stored_runs.append(StoredRun(run_id, run, started, completed))
            self.job_logs[run_id] = (secrets.token_urlsafe(12), run.log)
        self.check_runs[key] = stored_runs
        return [stored.id for stored in stored_runs]

    def fail_next(
        self,
        method: str,
        path_pattern: str,
        status: int,
        *,
        body: Any = None,
        headers: dict[str, str] | None = None,
        times: int = 1,
    ) -> None:
        """The next `times` requests of `method` ("*": any) whose API path (no prefix, no query)
        fully matches the regex `path_pattern` get `status` with `body` (default GitHub's
        `{"message": <reason>}`) and `headers` (over the usual rate-limit ones). A rate limit:
        403 with `{"message": "API rate limit exceeded ..."}` and `x-ratelimit-remaining: 0`;
        a secondary one: 429 (or 403) with `Retry-After`."""
        pattern = re.compile(path_pattern)
        self._faults.append(Fault(method.upper(), pattern, status, body, headers or {}, times))

    def hold_next(self, method: str, path_pattern: str) -> Hold:
        """The next request of ``method`` ("*": any) whose API path fully matches the regex
        ``path_pattern`` is handled and recorded as usual, then its answer waits until
        ``Hold.release`` (or the fake stops): GitHub did the work, the client has not heard."""
        hold = Hold(method.upper(), re.compile(path_pattern))
        self._holds.append(hold)
        return hold

    def clear_faults(self) -> None:
        self._faults.clear()

    # ---- observation

    @property
    def requests(self) -> list[RecordedRequest]:
        """Every request answered so far, in order (a copy)."""
        return list(self._requests)

    def pulls(self, full_name: str) -> list[PullRequest]:
        """The repository's pull requests by number (copies)."""
        key = self.repository(full_name).full_name.lower()
        return [replace(pull) for pull in self.pull_requests[key]]

    def comments(self, full_name: str, number: int) -> list[JSON]:
        return [dict(c) for c in self.issue_comments.get((full_name.lower(), number), [])]

    async def wait_for_request(
        self,
        predicate: Callable[[RecordedRequest], bool],
        timeout: float = 10.0,
        *,
        after: int = 0,
    ) -> RecordedRequest:
        """The first request (index >= `after`) matching `predicate`, waiting up to `timeout`
        seconds (TimeoutError names what was seen instead). A request is recorded as its answer
        is sent, so a client polling the fake is followed without sleeping."""
        if self._changed is None:
            raise RuntimeError("FakeGitHub is not started")
        found: list[RecordedRequest] = []

        def ready() -> bool:
            found[:] = [r for r in self._requests[after:] if predicate(r)][:1]
            return bool(found)

        try:
            async with asyncio.timeout(timeout), self._changed:
                await self._changed.wait_for(ready)
        except TimeoutError:
            seen = ", ".join(f"{r.method} {r.path} {r.status}" for r in self._requests[after:])
            raise TimeoutError(f"no matching GitHub request in {timeout} s; seen: {seen}") from None
        return found[0]

    # ---- helpers for the routes (harness.testing.fake_github_routes)

    def repository(self, full_name: str) -> Repository:
        try:
            return self.repos[full_name.lower()]
        except KeyError:
            raise KeyError(f"FakeGitHub has no repository {full_name!r}") from None

    def next_id(self) -> int:
        return next(self._ids)

    def stable_id(self, name: str) -> int:
        """The id of a user or repository (the same for the same name)."""
        return self._stable_ids.setdefault(name, 1000 + len(self._stable_ids))

    def pull_json(self, pull: PullRequest, mergeable_state: str) -> JSON:
        return pull.to_json(self.api_url, self.web_url, self.stable_id(pull.user), mergeable_state)

    def job_log_url(self, job_id: int) -> str:
        secret, _ = self.job_logs[job_id]
        return f"{self.web_url}/_fake/logs/{job_id}/{secret}"

    # ---- HTTP

    async def _serve_log(self, request: web.Request) -> web.Response:
        # Like GitHub's storage host: a signed URL, no authentication, plain text.
        entry = self.job_logs.get(int(request.match_info["job"]))
        if entry is None or entry[0] != request.match_info["secret"]:
            return web.Response(status=404, text="BlobNotFound")
        return web.Response(text=entry[1], content_type="text/plain")

    def _take_fault(self, method: str, path: str) -> Fault | None:
        for fault in self._faults:
            if fault.matches(method, path):
                fault.times -= 1
                if fault.times <= 0:
                    self._faults.remove(fault)
                return fault
        return None

    def _rate_headers(self, request: web.Request) -> dict[str, str]:
        key = bearer(request) or f"anonymous:{request.remote}"
        used = self._used[key] = self._used.get(key, 0) + 1
        limit = _RATE_LIMIT if key in self.credentials.tokens else 60
        return {
            "x-ratelimit-limit": str(limit),
            "x-ratelimit-remaining": str(max(0, limit - used)),
            "x-ratelimit-reset": str(self._reset),
            "x-ratelimit-used": str(used),
            "x-ratelimit-resource": "core",
        }

    @web.middleware
    async def _middleware(
        self, request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
    ) -> web.StreamResponse:
        raw = await request.read()
        request[BODY] = parse_body(request.content_type, raw)
        path = request.path
        if self._prefix and path.startswith(self._prefix + "/"):
            path = path[len(self._prefix) :]
        fault = self._take_fault(request.method, path)
        response: web.StreamResponse
        try:
            if fault is not None:
                body = fault.body if fault.body is not None else reason(fault.status)
                response = web.json_response(body, status=fault.status, headers=fault.headers)
            else:
                response = await handler(request)
        except ApiError as exc:
            response = web.json_response(exc.body, status=exc.status, headers=exc.headers)
        except web.HTTPException as exc:  # no such route or method
            response = web.json_response(reason(exc.status), status=exc.status)
        except Exception:
            # A bug of the fake: answered and recorded as a 500 so that the test sees it.
            logger.exception("fake GitHub failed on %s %s", request.method, request.path)
            response = web.json_response(reason(500), status=500)
        if not path.startswith("/_fake/"):
            for name, value in self._rate_headers(request).items():
                response.headers.setdefault(name, value)
            credential = self.credentials.tokens.get(bearer(request) or "")
            if credential is not None and credential.kind == "user":
                response.headers.setdefault("x-oauth-scopes", ", ".join(credential.scopes))
        recorded = await self._record(request, path, response.status)
        waiting = (h for h in self._holds if not h.reached.is_set())
        hold = next((h for h in waiting if h.matches(request.method, path)), None)
        if hold is not None:
            hold.request = recorded
            hold.reached.set()
            await hold.released.wait()
            self._holds.remove(hold)
        return response

    async def _record(self, request: web.Request, path: str, status: int) -> RecordedRequest:
        credential = self.credentials.tokens.get(bearer(request) or "")
        recorded = RecordedRequest(
            index=len(self._requests),
            method=request.method,
            path=path,
            query=dict(request.query),
            headers={k.lower(): v for k, v in request.headers.items()},
            body=request[BODY],
            status=status,
            login=credential.login if credential is not None else None,
        )
        self._requests.append(recorded)
        if self._changed is not None:
            async with self._changed:
                self._changed.notify_all()
        return recorded
