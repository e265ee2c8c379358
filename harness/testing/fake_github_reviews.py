"""The pull request review routes of the loopback GitHub fake: a pull request's files (with
their patches) and its diff (``Accept: application/vnd.github.v3.diff`` on the pull request),
both from `git diff` of its bare repository, and its reviews (listed, and posted with comments
on lines of the diff, refused as GitHub refuses them when a comment is not on one)."""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from aiohttp import web

from harness.testing.fake_github_model import (
    BODY,
    JSON,
    ApiError,
    PullRequest,
    Repository,
    git,
    iso,
    not_found,
    validation_failed,
)
from harness.testing.fake_github_routes import _visible_repo as visible_repo

if TYPE_CHECKING:
    from harness.testing.fake_github import FakeGitHub

_PULL = re.compile(r"/repos/(?P<owner>[^/]+)/(?P<repo>[^/]+)/pulls/(?P<number>\d+)")
_HUNK = re.compile(r"^@@ -\d+(?:,\d+)? \+(\d+)(?:,\d+)? @@")
_EVENTS = {"COMMENT": "COMMENTED", "APPROVE": "APPROVED", "REQUEST_CHANGES": "CHANGES_REQUESTED"}


async def pull_diff(repo: Repository, pull: PullRequest) -> str:
    """The pull request's diff against where its head left its base (a three-dot diff)."""
    if repo.bare is None:
        return ""
    base = await git(repo.bare, "merge-base", pull.base_sha, pull.head_sha) or pull.base_sha
    diff = await git(repo.bare, "diff", "--no-color", "--no-ext-diff", "-M", base, pull.head_sha)
    return (diff or "") + "\n" if diff else ""


def diff_files(diff: str) -> list[JSON]:
    """GitHub's file entries of a diff: name, status, counts and patch."""
    files: list[JSON] = []
    for chunk in re.split(r"^(?=diff --git )", diff, flags=re.MULTILINE):
        if not chunk.startswith("diff --git "):
            continue
        lines = chunk.rstrip("\n").split("\n")
        new = next((line[6:] for line in lines if line.startswith("+++ b/")), None)
        old = next((line[6:] for line in lines if line.startswith("--- a/")), None)
        renamed = next((line[12:] for line in lines if line.startswith("rename to ")), None)
        name = new or renamed or old or lines[0].split(" b/", 1)[-1]
        status = (
            "added" if any(line.startswith("new file mode") for line in lines)
            else "removed" if any(line.startswith("deleted file mode") for line in lines)
            else "renamed" if renamed else "modified"
        )  # fmt: skip
        start = next((i for i, line in enumerate(lines) if line.startswith("@@")), None)
        patch = "\n".join(lines[start:]) if start is not None else None
        body = lines[start:] if start is not None else []
        adds = sum(1 for line in body if line.startswith("+"))
        dels = sum(1 for line in body if line.startswith("-"))
        entry: JSON = {"filename": name, "status": status, "additions": adds,
                       "deletions": dels, "changes": adds + dels}  # fmt: skip
        if patch is not None:
            entry["patch"] = patch
        files.append(entry)
    return files


def right_lines(patch: str) -> set[int]:
    """The new side's lines a patch shows (added and context)."""
    lines: set[int] = set()
    number = 0
    for text in patch.split("\n"):
        hunk = _HUNK.match(text)
        if hunk:
            number = int(hunk.group(1))
        elif number and (text.startswith("+") or text.startswith(" ")):
            lines.add(number)
            number += 1
    return lines


def add_review_routes(app: web.Application, fake: FakeGitHub, api: str) -> None:
    """Adds the routes under the path prefix ``api`` and the diff media type of a pull request."""

    async def found(request: web.Request) -> tuple[Repository, PullRequest]:
        repo = visible_repo(fake, request, fake.credentials.user(request))
        for pull in fake.pull_requests[repo.full_name.lower()]:
            if str(pull.number) == request.match_info["number"]:
                sha = await repo.branch_sha(pull.head) if pull.state == "open" else None
                pull.head_sha = sha or pull.head_sha
                return repo, pull
        raise not_found()

    async def files(request: web.Request) -> web.Response:
        repo, pull = await found(request)
        listed = diff_files(await pull_diff(repo, pull))
        page, per_page = int(request.query.get("page", 1)), int(request.query.get("per_page", 30))
        return web.json_response(listed[(page - 1) * per_page : page * per_page])

    async def reviews(request: web.Request) -> web.Response:
        repo, pull = await found(request)
        return web.json_response(fake.reviews.get((repo.full_name.lower(), pull.number), []))

    async def post_review(request: web.Request) -> web.Response:
        credential = fake.credentials.user(request)
        repo, pull = await found(request)
        data: Any = request.get(BODY) or {}
        if not isinstance(data, dict):
            raise ApiError(400, "Problems parsing JSON")
        shown = {f["filename"]: right_lines(f.get("patch", ""))
                 for f in diff_files(await pull_diff(repo, pull))}  # fmt: skip
        comments = data.get("comments") or []
        for comment in comments:
            path, line = comment.get("path"), comment.get("line")
            if path not in shown:
                raise validation_failed({"resource": "PullRequestReviewComment", "code": "custom",
                                         "message": "Path could not be resolved"})  # fmt: skip
            if comment.get("side", "RIGHT") != "RIGHT" or line not in shown[path]:
                message = "Pull request review thread line must be part of the diff"
                raise validation_failed({"resource": "PullRequestReviewComment",
                                         "code": "custom", "message": message})  # fmt: skip
        review_id = fake.next_id()
        review: JSON = {
            "id": review_id,
            "node_id": f"PRR_{review_id}",
            "user": {"login": credential.login, "id": fake.stable_id(credential.login)},
            "body": str(data.get("body") or ""),
            "state": _EVENTS.get(str(data.get("event")), "PENDING"),
            "commit_id": str(data.get("commit_id") or pull.head_sha),
            "html_url": f"{fake.web_url}/{repo.full_name}/pull/{pull.number}"
            f"#pullrequestreview-{review_id}",
            "submitted_at": iso(),
            "comments": [dict(comment) for comment in comments],  # kept for tests to read
        }
        fake.reviews.setdefault((repo.full_name.lower(), pull.number), []).append(review)
        return web.json_response(review, status=200)

    @web.middleware
    async def diff_media_type(
        request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
    ) -> web.StreamResponse:
        path = request.path[len(api) :] if api and request.path.startswith(api) else request.path
        match = _PULL.fullmatch(path)
        if (
            request.method != "GET"
            or match is None
            or "diff" not in request.headers.get("Accept", "")
        ):
            return await handler(request)
        repo, pull = await found(request)
        return web.Response(text=await pull_diff(repo, pull), content_type="text/x-diff")

    repo_path = api + "/repos/{owner}/{repo}"
    app.router.add_get(repo_path + r"/pulls/{number:\d+}/files", files)
    app.router.add_get(repo_path + r"/pulls/{number:\d+}/reviews", reviews)
    app.router.add_post(repo_path + r"/pulls/{number:\d+}/reviews", post_review)
    app.middlewares.append(diff_media_type)
