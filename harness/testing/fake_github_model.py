"""State of the loopback GitHub fake (`harness.testing.fake_github`): records, check runs, pull
requests, repositories, and the `git` look-ups in their bare repositories."""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import subprocess
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from http import HTTPStatus
from pathlib import Path
from typing import Any, Literal
from urllib.parse import parse_qsl

from aiohttp import web

JSON = dict[str, Any]
# The request's parsed body, read once by the middleware for the routes and the record.
BODY = web.RequestKey("body", object)
DOCS = "https://docs.github.com/rest"
_HEX = re.compile(r"[0-9a-f]{7,40}")

CheckStatus = Literal["queued", "in_progress", "completed"]
CheckConclusion = Literal["success", "failure", "cancelled", "timed_out"]


def iso(moment: datetime | None = None, *, plus: float = 0.0) -> str:
    """A timestamp as GitHub writes them (UTC, whole seconds, a Z)."""
    moment = (moment or datetime.now(UTC)) + timedelta(seconds=plus)
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


class ApiError(Exception):
    """An error answer of the fake: raised by the routes, turned into JSON by the middleware."""

    def __init__(
        self,
        status: int,
        message: str,
        *,
        errors: list[JSON] | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(f"{status} {message}")
        self.status = status
        self.body: JSON = {"message": message, "documentation_url": DOCS}
        if errors is not None:
            self.body["errors"] = errors
        self.headers = headers or {}


def reason(status: int) -> JSON:
    """GitHub's error body for `status` alone."""
    with contextlib.suppress(ValueError):
        return {"message": HTTPStatus(status).phrase, "documentation_url": DOCS}
    return {"message": f"HTTP {status}", "documentation_url": DOCS}


def parse_body(content_type: str, raw: bytes) -> Any:
    """A JSON or form body as such (a form as a dict), another one as text."""
    if not raw:
        return None
    text = raw.decode("utf-8", errors="replace")
    if content_type == "application/json":
        with contextlib.suppress(ValueError):
            return json.loads(text)
    elif content_type == "application/x-www-form-urlencoded":
        return dict(parse_qsl(text, keep_blank_values=True))
    return text


def not_found() -> ApiError:
    return ApiError(404, "Not Found")


def validation_failed(*errors: JSON) -> ApiError:
    return ApiError(422, "Validation Failed", errors=list(errors))


@dataclass(frozen=True)
class CheckRun:
    """A check run (a GitHub Actions job) as `FakeGitHub.set_check_runs` sets it; `log` is the
    text its job's log download serves."""

    name: str
    status: CheckStatus = "completed"
    conclusion: CheckConclusion | None = None
    log: str = ""

    def __post_init__(self) -> None:
        # GitHub gives a conclusion to completed runs only; a test saying otherwise is a typo.
        if (self.status == "completed") != (self.conclusion is not None):
            raise ValueError(f"{self.name}: status {self.status} with {self.conclusion=}")


@dataclass(frozen=True)
class RecordedRequest:
    """One request the fake answered. `path` is relative to the API root (the `api_prefix` cut
    off) for API routes; `headers` have lower-case names; `body` is the parsed JSON or form (a
    dict), the text of another body, or None; `login` is whom the credentials named."""

    index: int
    method: str
    path: str
    query: dict[str, str]
    headers: dict[str, str]
    body: Any
    status: int
    login: str | None


@dataclass
class Fault:
    method: str
    pattern: re.Pattern[str]
    status: int
    body: Any
    headers: dict[str, str]
    times: int

    def matches(self, method: str, path: str) -> bool:
        return self.method in ("*", method.upper()) and self.pattern.fullmatch(path) is not None


@dataclass
class PullRequest:
    """A pull request of the fake (`FakeGitHub.pulls` hands out copies)."""

    id: int
    number: int
    repo: str
    title: str
    body: str | None
    head: str
    base: str
    head_sha: str
    base_sha: str
    draft: bool
    user: str
    user_type: Literal["User", "Bot"]
    state: Literal["open", "closed"] = "open"
    created_at: str = field(default_factory=iso)
    updated_at: str = field(default_factory=iso)
    closed_at: str | None = None

    def to_json(self, api_url: str, web_url: str, user_id: int, mergeable_state: str) -> JSON:
        owner = self.repo.split("/")[0]
        api = f"{api_url}/repos/{self.repo}"
        repo = {"full_name": self.repo, "html_url": f"{web_url}/{self.repo}", "url": api}
        return {
            "id": self.id,
            "node_id": f"PR_{self.id}",
            "number": self.number,
            "url": f"{api}/pulls/{self.number}",
            "html_url": f"{web_url}/{self.repo}/pull/{self.number}",
            "issue_url": f"{api}/issues/{self.number}",
            "comments_url": f"{api}/issues/{self.number}/comments",
            "statuses_url": f"{api}/statuses/{self.head_sha}",
            "state": self.state,
            "title": self.title,
            "body": self.body,
            "draft": self.draft,
            "merged": False,
            "merged_at": None,
            "mergeable_state": mergeable_state,
            "created_at": self.created_at,
            "updated_at": self.updated_at,
            "closed_at": self.closed_at,
            "user": {"login": self.user, "id": user_id, "type": self.user_type},
            "head": {
                "ref": self.head,
                "sha": self.head_sha,
                "label": f"{owner}:{self.head}",
                "repo": repo,
            },
            "base": {
                "ref": self.base,
                "sha": self.base_sha,
                "label": f"{owner}:{self.base}",
                "repo": repo,
            },
        }


@dataclass
class StoredRun:
    id: int
    run: CheckRun
    started_at: str | None
    completed_at: str | None

    def to_json(self, repo: str, sha: str, web_url: str) -> JSON:
        run = self.run
        # For GitHub Actions a check run's id is its job's id (which the log route takes).
        details = f"{web_url}/{repo}/actions/runs/{self.id}/job/{self.id}"
        summary = "" if run.conclusion is None else f"{run.name}: {run.conclusion}"
        return {
            "id": self.id,
            "name": run.name,
            "head_sha": sha,
            "status": run.status,
            "conclusion": run.conclusion,
            "html_url": details,
            "details_url": details,
            "started_at": self.started_at,
            "completed_at": self.completed_at,
            "output": {"title": summary or None, "summary": summary or None},
            "app": {"slug": "github-actions", "name": "GitHub Actions"},
        }


@dataclass
class Repository:
    full_name: str
    bare: Path | None
    default_branch: str
    collaborators: set[str] | None
    # Branch tips of a repository without a bare one (`FakeGitHub.set_branch`).
    branches: dict[str, str] = field(default_factory=dict)
    next_number: int = 1

    @property
    def owner(self) -> str:
        return self.full_name.split("/")[0]

    def can_see(self, login: str) -> bool:
        return self.collaborators is None or login in self.collaborators or login == self.owner

    async def branch_sha(self, branch: str) -> str | None:
        if self.bare is None:
            return self.branches.get(branch)
        return await git(self.bare, "rev-parse", "--verify", "--quiet", f"refs/heads/{branch}")

    async def resolve(self, ref: str) -> str | None:
        """A branch name's tip, or the full sha of a (possibly short) commit sha."""
        sha = await self.branch_sha(ref)
        if sha is not None or _HEX.fullmatch(ref) is None:
            return sha
        if self.bare is None:
            return ref if len(ref) == 40 else None
        return await git(self.bare, "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}")

    async def commits_between(self, base: str, head: str) -> int:
        if self.bare is None:
            return int(self.branches.get(base) != self.branches.get(head))
        out = await git(self.bare, "rev-list", "--count", f"refs/heads/{base}..refs/heads/{head}")
        return int(out or 0)


async def git(bare: Path, *args: str) -> str | None:
    """`git` in `bare` (in a thread: the fake's loop keeps answering); None when it fails."""

    def run() -> str | None:
        done = subprocess.run(
            ["git", "--git-dir", str(bare), *args], capture_output=True, text=True, check=False
        )
        return done.stdout.strip() if done.returncode == 0 else None

    return await asyncio.to_thread(run)
