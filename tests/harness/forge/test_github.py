"""The GitHub client's time: how long a rate limit asks to wait, and how long a GitHub App's
installation token is kept, both read from the client's clock."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path

import aiohttp
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from harness.config.forge_schema import GitHubAppSettings, GitHubRepository
from harness.errors import ForgeError
from harness.forge.github import AppTokens, GitHubRepo
from harness.testing.clock import FakeClock
from harness.testing.fake_github import FakeGitHub

pytestmark = pytest.mark.anyio

REPO = "acme/widgets"
TOKEN = "ghp_alice"


@pytest.fixture
async def fake() -> AsyncIterator[FakeGitHub]:
    async with FakeGitHub() as server:
        server.add_token(TOKEN, "alice")
        server.add_repository(REPO)
        yield server


@pytest.fixture
async def session() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as client:
        yield client


async def test_a_rate_limit_is_waited_out_only_once_the_clock_is_near_its_reset(
    fake: FakeGitHub, session: aiohttp.ClientSession
) -> None:
    clock = FakeClock()
    github = GitHubRepo(session, GitHubRepository(REPO, api_url=fake.api_url), TOKEN, clock)
    reset = {"x-ratelimit-remaining": "0", "x-ratelimit-reset": str(int(clock.timestamp()) + 600)}

    fake.fail_next("GET", rf"/repos/{REPO}/pulls", 403, headers=reset)
    with pytest.raises(ForgeError) as limited:
        await github.find_open_pull("feature")
    assert (limited.value.failure, limited.value.retry_after) == ("rate-limited", 600)
    assert "for 600 s" in limited.value.message

    clock.advance(600)  # at its reset: nothing left to wait, so tried again at once
    fake.fail_next("GET", rf"/repos/{REPO}/pulls", 403, headers=reset)
    assert await github.find_open_pull("feature") is None
    assert [r.path for r in fake.requests].count(f"/repos/{REPO}/pulls") == 3


async def test_an_app_token_is_kept_until_a_minute_before_it_expires_then_made_anew(
    fake: FakeGitHub, session: aiohttp.ClientSession, tmp_path: Path
) -> None:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    private = tmp_path / "app.pem"
    private.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    public = key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    fake.add_app(42, public, {7: {REPO}})
    # The fake says when a token expires in the real time: the clock starts there.
    clock = FakeClock(datetime.now(UTC))
    tokens = AppTokens(session, clock)
    repo = GitHubRepository(REPO, api_url=fake.api_url)
    app = GitHubAppSettings(app_id=42, private_key_file=private, installation_id=7)

    def minted() -> int:
        return sum(r.path.endswith("/access_tokens") for r in fake.requests)

    first = await tokens.token(repo, app)
    clock.advance(3500)  # GitHub's tokens last an hour
    assert await tokens.token(repo, app) == first and minted() == 1
    clock.advance(100)  # within its last minute
    second = await tokens.token(repo, app)
    assert second != first and minted() == 2
