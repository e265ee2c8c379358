"""The loopback GitHub fake, driven by the client the forge uses (gidgethub on aiohttp) and,
for the OAuth device flow's form posts, by plain aiohttp."""

from __future__ import annotations

import asyncio
import subprocess
from collections.abc import AsyncIterator
from dataclasses import dataclass
from http import HTTPStatus
from pathlib import Path
from typing import Any

import aiohttp
import gidgethub
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from gidgethub.aiohttp import GitHubAPI
from gidgethub.apps import get_installation_access_token, get_jwt

from harness.testing.fake_github import CheckRun, FakeGitHub

pytestmark = [pytest.mark.anyio, pytest.mark.git]

REPO = "acme/widgets"
TOKEN = "ghp_alice"


def _git(cwd: Path, *args: str) -> str:
    config = ["-c", "user.name=Test", "-c", "user.email=test@example.com"]
    config += ["-c", "commit.gpgsign=false", "-c", "init.defaultBranch=main"]
    done = subprocess.run(
        ["git", *config, *args], cwd=cwd, capture_output=True, text=True, check=True
    )
    return done.stdout.strip()


@dataclass
class Clone:
    """A working clone of the fake's bare repository, pushing for real."""

    work: Path
    bare: Path

    def push(self, branch: str, filename: str) -> str:
        """Commits `filename` on `branch` (created from main when new), pushes, returns the
        commit's sha."""
        if _git(self.work, "symbolic-ref", "--short", "HEAD") != branch:  # main is unborn
            exists = _git(self.work, "branch", "--list", branch)
            _git(self.work, "checkout", "-q", *([branch] if exists else ["-b", branch, "main"]))
        (self.work / filename).write_text(f"{filename}\n")
        _git(self.work, "add", filename)
        _git(self.work, "commit", "-q", "-m", f"add {filename}")
        _git(self.work, "push", "-q", "origin", branch)
        return _git(self.work, "rev-parse", "HEAD")


@pytest.fixture
def clone(tmp_path: Path) -> Clone:
    bare = tmp_path / "widgets.git"
    _git(tmp_path, "init", "-q", "--bare", str(bare))
    _git(tmp_path, "clone", "-q", str(bare), "work")
    repo = Clone(tmp_path / "work", bare)
    repo.push("main", "README")
    return repo


@pytest.fixture
async def fake(clone: Clone) -> AsyncIterator[FakeGitHub]:
    async with FakeGitHub(device_interval=0) as server:
        server.add_token(TOKEN, "alice")
        server.add_repository(REPO, bare=clone.bare, collaborators={"alice"})
        yield server


@pytest.fixture
async def session() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as client:
        yield client


def _gh(session: aiohttp.ClientSession, fake: FakeGitHub, token: str = TOKEN) -> GitHubAPI:
    return GitHubAPI(session, "harness-tests", oauth_token=token, base_url=fake.api_url)


async def _open_pull(gh: GitHubAPI, head: str = "feature") -> dict[str, Any]:
    data = {"title": "Add widget", "body": "Closes #1", "head": head, "base": "main"}
    pull: dict[str, Any] = await gh.post(f"/repos/{REPO}/pulls", data=data)
    return pull


# --------------------------------------------------------------------------- REST


async def test_pull_request_on_a_pushed_branch(
    fake: FakeGitHub, clone: Clone, session: aiohttp.ClientSession
) -> None:
    sha = clone.push("feature", "widget.py")
    gh = _gh(session, fake)
    assert (await gh.getitem("/user"))["login"] == "alice"
    repo = await gh.getitem(f"/repos/{REPO}")
    assert (repo["default_branch"], repo["permissions"]["push"]) == ("main", True)

    pull = await gh.post(
        f"/repos/{REPO}/pulls",
        data={"title": "Add widget", "body": "b", "head": "acme:feature", "base": "main"},
    )
    assert pull["number"] == 1 and pull["state"] == "open" and pull["draft"] is False
    assert pull["html_url"] == f"{fake.web_url}/{REPO}/pull/1"
    assert pull["head"] == {**pull["head"], "ref": "feature", "sha": sha, "label": "acme:feature"}
    assert (pull["base"]["ref"], pull["user"]["login"]) == ("main", "alice")
    assert gh.rate_limit is not None and gh.rate_limit.limit == 5000

    comment = await gh.post(pull["comments_url"], data={"body": "Checks are running."})
    assert comment["user"]["login"] == "alice"
    assert comment["html_url"].startswith(f"{fake.web_url}/{REPO}/pull/1#issuecomment-")
    assert [c["body"] for c in fake.comments(REPO, 1)] == ["Checks are running."]

    newer = clone.push("feature", "more.py")  # the head follows the branch
    assert (await gh.getitem(f"/repos/{REPO}/pulls/1"))["head"]["sha"] == newer
    listed = await gh.getitem(f"/repos/{REPO}/pulls?head=acme:feature&state=open")
    assert [p["number"] for p in listed] == [1]
    closed = await gh.patch(f"/repos/{REPO}/pulls/1", data={"state": "closed", "title": "T"})
    assert (closed["state"], closed["title"]) == ("closed", "T")
    assert await gh.getitem(f"/repos/{REPO}/pulls?head=acme:feature") == []
    assert [(p.number, p.state, p.head_sha) for p in fake.pulls(REPO)] == [(1, "closed", newer)]


async def test_pull_request_validation_failures(
    fake: FakeGitHub, clone: Clone, session: aiohttp.ClientSession
) -> None:
    gh = _gh(session, fake)
    with pytest.raises(gidgethub.InvalidField) as missing:
        await _open_pull(gh, head="never-pushed")
    assert missing.value.status_code == HTTPStatus.UNPROCESSABLE_ENTITY
    assert missing.value.errors == [{"resource": "PullRequest", "field": "head", "code": "invalid"}]
    assert str(missing.value) == "Validation Failed for 'head'"

    _git(clone.work, "push", "-q", "origin", "main:empty")  # a branch without new commits
    with pytest.raises(gidgethub.ValidationError) as empty:
        await _open_pull(gh, head="empty")
    assert str(empty.value) == "Validation Failed: 'No commits between main and empty'"

    clone.push("feature", "widget.py")
    await _open_pull(gh)
    with pytest.raises(gidgethub.ValidationError) as duplicate:
        await _open_pull(gh)
    assert duplicate.value.errors[0]["code"] == "custom"
    assert "A pull request already exists for acme:feature." in str(duplicate.value)
    assert len(fake.pulls(REPO)) == 1


async def test_bad_credentials_and_hidden_repositories(
    fake: FakeGitHub, session: aiohttp.ClientSession
) -> None:
    with pytest.raises(gidgethub.BadRequest) as bad:
        await _gh(session, fake, "ghp_unknown").getitem("/user")
    assert bad.value.status_code == HTTPStatus.UNAUTHORIZED
    assert str(bad.value) == "Bad credentials"
    async with session.get(f"{fake.api_url}/user") as anonymous:
        assert anonymous.status == 401
        assert anonymous.headers["x-ratelimit-limit"] == "60"

    fake.add_token("ghp_bob", "bob")  # a login that is no collaborator sees nothing
    for token, path in ((TOKEN, "/repos/acme/nope"), ("ghp_bob", f"/repos/{REPO}")):
        with pytest.raises(gidgethub.BadRequest) as hidden:
            await _gh(session, fake, token).getitem(path)
        assert (hidden.value.status_code, str(hidden.value)) == (HTTPStatus.NOT_FOUND, "Not Found")


async def test_check_runs_by_sha_and_by_branch(
    fake: FakeGitHub, clone: Clone, session: aiohttp.ClientSession
) -> None:
    sha = clone.push("feature", "widget.py")
    assert await fake.branch_sha(REPO, "feature") == sha
    ids = fake.set_check_runs(
        REPO, sha, [CheckRun("lint", "in_progress"), CheckRun("test", "queued")]
    )
    gh = _gh(session, fake)
    by_sha = await gh.getitem(f"/repos/{REPO}/commits/{sha}/check-runs")
    assert by_sha["total_count"] == 2
    lint = by_sha["check_runs"][0]
    assert (lint["id"], lint["status"], lint["conclusion"], lint["head_sha"]) == (
        ids[0],
        "in_progress",
        None,
        sha,
    )
    assert lint["app"]["slug"] == "github-actions" and lint["started_at"] is not None

    again = fake.set_check_runs(
        REPO,
        sha,
        [CheckRun("lint", "completed", "success"), CheckRun("test", "completed", "failure")],
    )
    assert again == ids  # a job keeps its id as it runs
    by_branch = await gh.getitem(f"/repos/{REPO}/commits/feature/check-runs")
    assert [(r["name"], r["conclusion"]) for r in by_branch["check_runs"]] == [
        ("lint", "success"),
        ("test", "failure"),
    ]
    with pytest.raises(gidgethub.BadRequest) as unknown:
        await gh.getitem(f"/repos/{REPO}/commits/no-such-branch/check-runs")
    assert unknown.value.status_code == HTTPStatus.UNPROCESSABLE_ENTITY
    with pytest.raises(ValueError, match="conclusion"):
        CheckRun("bad", "completed")


async def test_job_log_is_a_redirect_that_aiohttp_follows(
    fake: FakeGitHub, clone: Clone, session: aiohttp.ClientSession
) -> None:
    sha = clone.push("feature", "widget.py")
    log = "Run pytest\nE   assert 1 == 2\n"
    [job] = fake.set_check_runs(REPO, sha, [CheckRun("test", "completed", "failure", log)])
    path = f"/repos/{REPO}/actions/jobs/{job}/logs"
    gh = _gh(session, fake)
    assert await gh.getitem(path) == log  # aiohttp follows the 302; gidgethub returns the text
    assert gh.rate_limit is None  # the storage URL's answer has no rate-limit headers

    headers = {"Authorization": f"token {TOKEN}"}
    async with session.get(fake.api_url + path, headers=headers, allow_redirects=False) as hop:
        assert hop.status == 302
        location = hop.headers["Location"]
    async with session.get(location) as raw:  # the storage URL needs no credentials
        assert (raw.status, raw.content_type, await raw.text()) == (200, "text/plain", log)


async def test_rate_limit_and_server_errors_surface_as_gidgethub_exceptions(
    fake: FakeGitHub, session: aiohttp.ClientSession
) -> None:
    gh = _gh(session, fake)
    fake.fail_next(
        "GET",
        "/repos/.*",
        403,
        body={"message": "API rate limit exceeded for user ID 1."},
        headers={"x-ratelimit-remaining": "0"},
    )
    fake.fail_next("GET", "/user", 429, headers={"Retry-After": "7"})
    secondary = {"message": "You have exceeded a secondary rate limit."}
    fake.fail_next("GET", "/user", 403, body=secondary, headers={"Retry-After": "60"})
    fake.fail_next("*", "/user", 502)
    with pytest.raises(gidgethub.RateLimitExceeded) as limited:
        await gh.getitem(f"/repos/{REPO}")
    assert limited.value.rate_limit.remaining == 0
    assert str(limited.value) == "API rate limit exceeded for user ID 1."

    with pytest.raises(gidgethub.BadRequest) as throttled:
        await gh.getitem("/user")
    assert not isinstance(throttled.value, gidgethub.RateLimitExceeded)
    assert throttled.value.status_code == HTTPStatus.TOO_MANY_REQUESTS
    assert throttled.value.headers["Retry-After"] == "7"
    with pytest.raises(gidgethub.BadRequest) as secondary_limit:  # remaining > 0: no RateLimit
        await gh.getitem("/user")
    assert not isinstance(secondary_limit.value, gidgethub.RateLimitExceeded)
    assert secondary_limit.value.status_code == HTTPStatus.FORBIDDEN
    assert secondary_limit.value.headers["Retry-After"] == "60"
    with pytest.raises(gidgethub.GitHubBroken) as broken:
        await gh.getitem("/user")
    assert broken.value.status_code == HTTPStatus.BAD_GATEWAY
    assert (await gh.getitem("/user"))["login"] == "alice"  # each fault answers once
    assert [r.status for r in fake.requests] == [403, 429, 403, 502, 200]


async def test_requests_are_recorded_and_awaitable(
    fake: FakeGitHub, clone: Clone, session: aiohttp.ClientSession
) -> None:
    clone.push("feature", "widget.py")
    gh = _gh(session, fake)
    opened = asyncio.create_task(_open_pull(gh))
    request = await fake.wait_for_request(lambda r: r.method == "POST")
    await opened
    assert request.path == f"/repos/{REPO}/pulls" and request.status == 201
    assert request.body["head"] == "feature" and request.login == "alice"
    assert request.headers["authorization"] == f"token {TOKEN}"
    assert request.headers["user-agent"] == "harness-tests"

    with pytest.raises(TimeoutError, match="POST /repos/acme/widgets/pulls 201"):
        await fake.wait_for_request(lambda r: r.method == "DELETE", timeout=0.05)


async def test_a_poller_is_followed_without_sleeping(
    fake: FakeGitHub, clone: Clone, session: aiohttp.ClientSession
) -> None:
    sha = clone.push("feature", "widget.py")
    fake.set_check_runs(REPO, sha, [CheckRun("test", "in_progress")])
    gh = _gh(session, fake)

    async def follow() -> list[str]:  # what the forge does, minus its interval
        while True:
            runs = await gh.getitem(f"/repos/{REPO}/commits/{sha}/check-runs?check_name=test")
            if all(run["status"] == "completed" for run in runs["check_runs"]):
                return [run["conclusion"] for run in runs["check_runs"]]

    poller = asyncio.create_task(follow())
    polled = await fake.wait_for_request(lambda r: r.path.endswith("/check-runs"))
    assert polled.query == {"check_name": "test"}
    fake.set_check_runs(REPO, sha, [CheckRun("test", "completed", "success")])
    assert await poller == ["success"]


async def test_api_under_a_path_prefix(session: aiohttp.ClientSession) -> None:
    # GitHub Enterprise serves the API under /api/v3 and the web pages at the root.
    async with FakeGitHub(api_prefix="/api/v3") as ghe:
        ghe.add_token(TOKEN, "alice")
        ghe.add_repository(REPO)
        ghe.set_branch(REPO, "main", "a" * 40)
        ghe.set_branch(REPO, "feature", "b" * 40)
        assert ghe.api_url == ghe.web_url + "/api/v3"
        pull = await _open_pull(_gh(session, ghe))
        assert pull["html_url"] == f"{ghe.web_url}/{REPO}/pull/1"
        assert ghe.requests[-1].path == f"/repos/{REPO}/pulls"


# --------------------------------------------------------------------------- GitHub App


async def test_app_installation_token_opens_pull_requests_as_the_bot(
    fake: FakeGitHub, clone: Clone, session: aiohttp.ClientSession
) -> None:
    private, public = _key_pair()
    fake.add_app(42, public, {7: {REPO}}, slug="harness-app")
    clone.push("feature", "widget.py")

    anonymous = GitHubAPI(session, "harness-tests", base_url=fake.api_url)
    jwt = get_jwt(app_id="42", private_key=private)
    assert (await anonymous.getitem(f"/repos/{REPO}/installation", jwt=jwt))["id"] == 7
    minted = await get_installation_access_token(
        anonymous, installation_id="7", app_id="42", private_key=private
    )
    assert minted["token"].startswith("ghs_") and minted["expires_at"].endswith("Z")

    bot = _gh(session, fake, minted["token"])
    pull = await _open_pull(bot)
    assert pull["user"] == {**pull["user"], "login": "harness-app[bot]", "type": "Bot"}
    fake.add_repository("acme/elsewhere")  # not in the installation: hidden from its token
    for path, status in (("/repos/acme/elsewhere", 404), ("/user", 403)):
        with pytest.raises(gidgethub.BadRequest) as out_of_reach:
            await bot.getitem(path)
        assert out_of_reach.value.status_code == status

    forged = get_jwt(app_id="42", private_key=_key_pair()[0])
    with pytest.raises(gidgethub.BadRequest) as refused:
        await anonymous.getitem(f"/repos/{REPO}/installation", jwt=forged)
    assert refused.value.status_code == HTTPStatus.UNAUTHORIZED


def _key_pair() -> tuple[str, bytes]:
    """A GitHub App's private key (PEM text, as gidgethub takes it) and its public key."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    private = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    public = key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    return private.decode(), public


# --------------------------------------------------------------------------- device flow


async def _post_form(session: aiohttp.ClientSession, url: str, **form: str) -> dict[str, object]:
    headers = {"Accept": "application/json"}
    async with session.post(url, data=form, headers=headers) as response:
        assert response.status == 200
        answer: dict[str, object] = await response.json()
        return answer


async def _device_code(fake: FakeGitHub, session: aiohttp.ClientSession) -> dict[str, object]:
    fake.add_oauth_app("Iv1.client")
    return await _post_form(
        session, f"{fake.web_url}/login/device/code", client_id="Iv1.client", scope="repo"
    )


async def _poll(
    fake: FakeGitHub,
    session: aiohttp.ClientSession,
    device_code: object,
    client: str = "Iv1.client",
) -> dict[str, object]:
    return await _post_form(
        session,
        f"{fake.web_url}/login/oauth/access_token",
        client_id=client,
        device_code=str(device_code),
        grant_type="urn:ietf:params:oauth:grant-type:device_code",
    )


async def test_device_flow_pending_then_approved(
    fake: FakeGitHub, session: aiohttp.ClientSession
) -> None:
    code = await _device_code(fake, session)
    assert code["verification_uri"] == f"{fake.web_url}/login/device"
    assert code["interval"] == 0
    user_code = str(code["user_code"])
    assert len(user_code) == 9 and user_code[4] == "-"
    assert (await _poll(fake, session, code["device_code"]))["error"] == "authorization_pending"

    token = fake.approve_device(user_code, "carol")
    granted = await _poll(fake, session, code["device_code"])
    assert granted == {"access_token": token, "token_type": "bearer", "scope": "repo"}
    assert (await _gh(session, fake, token).getitem("/user"))["login"] == "carol"
    assert (await _poll(fake, session, code["device_code"]))["error"] == "incorrect_device_code"


async def test_device_flow_slow_down_denied_and_unknown_client(
    fake: FakeGitHub, session: aiohttp.ClientSession
) -> None:
    fake.device_interval = 5
    code = await _device_code(fake, session)
    assert code["interval"] == 5
    slow = await _poll(fake, session, code["device_code"])  # at once: faster than 5 s
    assert (slow["error"], slow["interval"]) == ("slow_down", 10)

    fake.deny_device(str(code["user_code"]))
    assert (await _poll(fake, session, code["device_code"]))["error"] == "access_denied"
    unknown = await _poll(fake, session, code["device_code"], client="Iv1.other")
    assert unknown["error"] == "incorrect_client_credentials"


async def test_device_flow_answers_form_encoded_without_accept_json(
    fake: FakeGitHub, session: aiohttp.ClientSession
) -> None:
    fake.add_oauth_app("Iv1.client")
    url = f"{fake.web_url}/login/device/code"
    async with session.post(url, data={"client_id": "Iv1.client", "scope": "repo"}) as response:
        assert response.content_type == "application/x-www-form-urlencoded"
        form = dict(pair.split("=", 1) for pair in (await response.text()).split("&"))
    fake.expire_device(form["user_code"])
    assert (await _poll(fake, session, form["device_code"]))["error"] == "expired_token"
