"""The REST routes of the loopback GitHub fake (`harness.testing.fake_github.FakeGitHub`):
the user, repositories, pull requests, issue comments, check runs and job logs."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from aiohttp import web

from harness.testing.fake_github_auth import Credential
from harness.testing.fake_github_model import (
    BODY,
    JSON,
    ApiError,
    PullRequest,
    Repository,
    iso,
    not_found,
    validation_failed,
)

if TYPE_CHECKING:
    from harness.testing.fake_github import FakeGitHub


def _object(request: web.Request) -> JSON:
    body: Any = request.get(BODY)
    if body is None:
        return {}
    if not isinstance(body, dict):
        raise ApiError(400, "Problems parsing JSON")
    return body


def _visible_repo(fake: FakeGitHub, request: web.Request, credential: Credential) -> Repository:
    """The route's repository if `credential` may see it; else GitHub's 404."""
    full_name = f"{request.match_info['owner']}/{request.match_info['repo']}".lower()
    repo = fake.repos.get(full_name)
    if repo is None:
        raise not_found()
    if credential.kind == "installation":
        if credential.repos is None or full_name not in credential.repos:
            raise not_found()
    elif "repo" not in credential.scopes or not repo.can_see(credential.login):
        raise not_found()  # private repositories are hidden, not forbidden
    return repo


def _mergeable_state(fake: FakeGitHub, pull: PullRequest) -> str:
    """ "clean" when every check run of the head passed, "unstable" when one failed, else
    "blocked" while some still run (no checks: "clean")."""
    runs = fake.check_runs.get((pull.repo.lower(), pull.head_sha), [])
    if any(r.run.status != "completed" for r in runs):
        return "blocked"
    if any(r.run.conclusion != "success" for r in runs):
        return "unstable"
    return "clean"


def add_api_routes(app: web.Application, fake: FakeGitHub, api: str) -> None:
    """Adds the REST routes under the path prefix `api` ("" or e.g. "/api/v3")."""

    async def user(request: web.Request) -> web.Response:
        credential = fake.credentials.user(request)
        if credential.kind == "installation":
            raise ApiError(403, "Resource not accessible by integration")
        login = credential.login
        return web.json_response({"login": login, "id": fake.stable_id(login), "type": "User"})

    async def repository(request: web.Request) -> web.Response:
        credential = fake.credentials.user(request)
        repo = _visible_repo(fake, request, credential)
        return web.json_response(
            {
                "id": fake.stable_id(repo.full_name),
                "name": repo.full_name.split("/")[1],
                "full_name": repo.full_name,
                "owner": {"login": repo.owner},
                "default_branch": repo.default_branch,
                "html_url": f"{fake.web_url}/{repo.full_name}",
                "url": f"{fake.api_url}/repos/{repo.full_name}",
                "clone_url": f"{fake.web_url}/{repo.full_name}.git",
                "private": True,
                "permissions": {
                    "admin": credential.login == repo.owner,
                    "push": True,
                    "pull": True,
                },
            }
        )

    def head_ref(repo: Repository, head: str) -> str:
        owner, sep, branch = head.rpartition(":")
        if sep and owner.lower() != repo.owner.lower():
            raise validation_failed({"resource": "PullRequest", "field": "head", "code": "invalid"})
        return branch

    async def create_pull(request: web.Request) -> web.Response:
        credential = fake.credentials.user(request)
        repo = _visible_repo(fake, request, credential)
        data = _object(request)
        for name in ("title", "head", "base"):
            if not isinstance(data.get(name), str) or not data[name]:
                missing = {"resource": "PullRequest", "field": name, "code": "missing_field"}
                raise validation_failed(missing)
        head, base = head_ref(repo, data["head"]), str(data["base"])
        head_sha = await repo.branch_sha(head)
        if head_sha is None:
            raise validation_failed({"resource": "PullRequest", "field": "head", "code": "invalid"})
        base_sha = await repo.branch_sha(base)
        if base_sha is None:
            raise validation_failed({"resource": "PullRequest", "field": "base", "code": "invalid"})
        pulls = fake.pull_requests[repo.full_name.lower()]
        if any(p.state == "open" and p.head == head and p.base == base for p in pulls):
            message = f"A pull request already exists for {repo.owner}:{head}."
            raise validation_failed(
                {"resource": "PullRequest", "code": "custom", "message": message}
            )
        if await repo.commits_between(base, head) == 0:
            message = f"No commits between {base} and {head}"
            raise validation_failed(
                {"resource": "PullRequest", "code": "custom", "message": message}
            )
        pull = PullRequest(
            id=fake.next_id(),
            number=repo.next_number,
            repo=repo.full_name,
            title=data["title"],
            body=data.get("body"),
            head=head,
            base=base,
            head_sha=head_sha,
            base_sha=base_sha,
            draft=bool(data.get("draft", False)),
            user=credential.login,
            user_type="Bot" if credential.kind == "installation" else "User",
        )
        repo.next_number += 1
        pulls.append(pull)
        # GitHub computes mergeability after answering: a new pull request's is "unknown".
        return web.json_response(fake.pull_json(pull, "unknown"), status=201)

    async def refreshed(repo: Repository, pull: PullRequest) -> PullRequest:
        sha = await repo.branch_sha(pull.head) if pull.state == "open" else None
        if sha is not None:  # a deleted branch leaves the last known head
            pull.head_sha = sha
        return pull

    async def list_pulls(request: web.Request) -> web.Response:
        repo = _visible_repo(fake, request, fake.credentials.user(request))
        state = request.query.get("state", "open")
        if state not in ("open", "closed", "all"):
            raise validation_failed(
                {"resource": "PullRequest", "field": "state", "code": "invalid"}
            )
        head = request.query.get("head")
        base = request.query.get("base")
        found = []
        for pull in reversed(fake.pull_requests[repo.full_name.lower()]):  # newest first
            if state != "all" and pull.state != state:
                continue
            if head is not None and head_ref(repo, head) != pull.head:
                continue
            if base is not None and base != pull.base:
                continue
            pull = await refreshed(repo, pull)
            found.append(fake.pull_json(pull, _mergeable_state(fake, pull)))
        return web.json_response(found)

    def find_pull(repo: Repository, number: str) -> PullRequest:
        for pull in fake.pull_requests[repo.full_name.lower()]:
            if str(pull.number) == number:
                return pull
        raise not_found()

    async def get_pull(request: web.Request) -> web.Response:
        repo = _visible_repo(fake, request, fake.credentials.user(request))
        pull = await refreshed(repo, find_pull(repo, request.match_info["number"]))
        return web.json_response(fake.pull_json(pull, _mergeable_state(fake, pull)))

    async def update_pull(request: web.Request) -> web.Response:
        repo = _visible_repo(fake, request, fake.credentials.user(request))
        pull = find_pull(repo, request.match_info["number"])
        data = _object(request)
        state = data.get("state", pull.state)
        if state not in ("open", "closed"):
            raise validation_failed(
                {"resource": "PullRequest", "field": "state", "code": "invalid"}
            )
        if "title" in data:
            pull.title = str(data["title"])
        if "body" in data:
            pull.body = data["body"]
        if state != pull.state:
            pull.state = state
            pull.closed_at = iso() if state == "closed" else None
        pull.updated_at = iso()
        pull = await refreshed(repo, pull)
        return web.json_response(fake.pull_json(pull, _mergeable_state(fake, pull)))

    async def add_comment(request: web.Request) -> web.Response:
        credential = fake.credentials.user(request)
        repo = _visible_repo(fake, request, credential)
        pull = find_pull(repo, request.match_info["number"])
        body = _object(request).get("body")
        if not isinstance(body, str) or not body:
            raise validation_failed(
                {"resource": "IssueComment", "field": "body", "code": "missing_field"}
            )
        comment_id = fake.next_id()
        comment: JSON = {
            "id": comment_id,
            "html_url": f"{fake.web_url}/{repo.full_name}/pull/{pull.number}"
            f"#issuecomment-{comment_id}",
            "url": f"{fake.api_url}/repos/{repo.full_name}/issues/comments/{comment_id}",
            "body": body,
            "user": {"login": credential.login, "id": fake.stable_id(credential.login)},
            "created_at": iso(),
            "updated_at": iso(),
        }
        fake.issue_comments.setdefault((repo.full_name.lower(), pull.number), []).append(comment)
        return web.json_response(comment, status=201)

    async def list_comments(request: web.Request) -> web.Response:
        repo = _visible_repo(fake, request, fake.credentials.user(request))
        pull = find_pull(repo, request.match_info["number"])
        return web.json_response(fake.comments(repo.full_name, pull.number))

    async def check_runs(request: web.Request) -> web.Response:
        repo = _visible_repo(fake, request, fake.credentials.user(request))
        ref = request.match_info["ref"]
        sha = await repo.resolve(ref)
        if sha is None:
            raise ApiError(422, f"No commit found for SHA: {ref}")
        runs = fake.check_runs.get((repo.full_name.lower(), sha), [])
        name, status = request.query.get("check_name"), request.query.get("status")
        shown = [
            stored.to_json(repo.full_name, sha, fake.web_url)
            for stored in runs
            if (name is None or stored.run.name == name)
            and (status is None or stored.run.status == status)
        ]
        return web.json_response({"total_count": len(shown), "check_runs": shown})

    async def job_log(request: web.Request) -> web.Response:
        repo = _visible_repo(fake, request, fake.credentials.user(request))
        job_id = int(request.match_info["job"])
        owned = any(
            stored.id == job_id
            for (name, _), runs in fake.check_runs.items()
            if name == repo.full_name.lower()
            for stored in runs
        )
        if not owned:
            raise not_found()
        # GitHub answers with a short-lived redirect to its storage host.
        return web.Response(status=302, headers={"Location": fake.job_log_url(job_id)})

    repo_path = api + "/repos/{owner}/{repo}"
    app.router.add_get(api + "/user", user)
    app.router.add_get(repo_path, repository)
    app.router.add_post(repo_path + "/pulls", create_pull)
    app.router.add_get(repo_path + "/pulls", list_pulls)
    app.router.add_get(repo_path + r"/pulls/{number:\d+}", get_pull)
    app.router.add_patch(repo_path + r"/pulls/{number:\d+}", update_pull)
    app.router.add_post(repo_path + r"/issues/{number:\d+}/comments", add_comment)
    app.router.add_get(repo_path + r"/issues/{number:\d+}/comments", list_comments)
    app.router.add_get(repo_path + "/commits/{ref:.+}/check-runs", check_runs)
    app.router.add_get(repo_path + r"/actions/jobs/{job:\d+}/logs", job_log)
