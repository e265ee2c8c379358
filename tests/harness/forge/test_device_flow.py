"""GitHub's OAuth device flow against the loopback GitHub: the code a person is shown, the
polling at GitHub's pace until they approve, deny or let the code expire, and whose token it
is. Time between polls is the test's own (``sleep``/``clock``): no test waits for real."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field

import aiohttp
import pytest

from harness.errors import ForgeError
from harness.forge.device_flow import DeviceFlow, GrantedToken
from harness.testing.fake_github import FakeGitHub

pytestmark = pytest.mark.anyio

CLIENT_ID = "Iv1.harness-tests"
POLL_PATH = "/login/oauth/access_token"
WAIT = 10.0


@pytest.fixture
async def github() -> AsyncIterator[FakeGitHub]:
    async with FakeGitHub(device_interval=0) as fake:
        fake.add_oauth_app(CLIENT_ID)
        yield fake


@pytest.fixture
async def session() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as opened:
        yield opened


@dataclass
class Time:
    """The flow's clock and its waits: each wait moves the clock on (by ``step`` when set,
    else by what was asked) and may do something, as a person would meanwhile."""

    now: float = 0.0
    waits: list[float] = field(default_factory=list)
    step: Callable[[int], float | None] = lambda _: None
    meanwhile: Callable[[int], None] = lambda _: None

    async def sleep(self, seconds: float) -> None:
        self.waits.append(seconds)
        moved = self.step(len(self.waits))
        self.now += seconds if moved is None else moved
        self.meanwhile(len(self.waits))

    def clock(self) -> float:
        return self.now


def flow(
    github: FakeGitHub,
    session: aiohttp.ClientSession,
    time: Time | None = None,
    client_id: str = CLIENT_ID,
) -> DeviceFlow:
    if time is None:
        return DeviceFlow(session, web_url=github.web_url, api_url=github.api_url,
                          client_id=client_id)  # fmt: skip
    return DeviceFlow(session, web_url=github.web_url, api_url=github.api_url,
                      client_id=client_id, sleep=time.sleep, clock=time.clock)  # fmt: skip


async def polled(github: FakeGitHub) -> None:
    await github.wait_for_request(lambda r: r.path == POLL_PATH, WAIT)


async def test_a_person_who_approves_the_code_is_linked_with_their_login(
    github: FakeGitHub, session: aiohttp.ClientSession
) -> None:
    device = flow(github, session)
    code = await device.start()
    assert code.verification_uri == f"{github.web_url}/login/device"
    assert len(code.user_code) == 9 and code.expires_in == 900
    [asked] = [r for r in github.requests if r.path == "/login/device/code"]
    assert asked.body == {"client_id": CLIENT_ID, "scope": "repo"}

    finishing = asyncio.create_task(device.finish(code))
    await polled(github)  # still pending: nobody approved yet
    assert not finishing.done()
    token = github.approve_device(code.user_code, "alice")

    granted = await asyncio.wait_for(finishing, WAIT)
    assert granted == GrantedToken("alice", token)
    assert token not in repr(granted)
    [whoami] = [r for r in github.requests if r.path == "/user"]
    assert whoami.login == "alice"


async def test_slow_down_makes_the_flow_wait_five_seconds_longer(
    github: FakeGitHub, session: aiohttp.ClientSession
) -> None:
    github.device_interval = 5
    time = Time()
    github.credentials.clock = time.clock
    device = flow(github, session, time)
    code = await device.start()

    def first_too_soon(wait: int) -> float | None:
        return 1.0 if wait == 1 else None  # the first poll comes before GitHub's 5 s

    def approve_on_third(wait: int) -> None:
        if wait == 3:
            github.approve_device(code.user_code, "alice")

    time.step, time.meanwhile = first_too_soon, approve_on_third
    granted = await asyncio.wait_for(device.finish(code), WAIT)

    assert granted.login == "alice"
    assert time.waits == [5, 10, 10]  # slow_down said 10 s, and 10 s it stays


@pytest.mark.parametrize(
    ("act", "said", "fix"),
    [
        (FakeGitHub.deny_device, "was denied on GitHub", "choose Authorize"),
        (FakeGitHub.expire_device, "expired before it was entered", "enter the new code"),
    ],
)
async def test_a_denied_or_expired_code_says_so_and_how_to_try_again(
    github: FakeGitHub,
    session: aiohttp.ClientSession,
    act: Callable[[FakeGitHub, str], None],
    said: str,
    fix: str,
) -> None:
    device = flow(github, session)
    code = await device.start()
    finishing = asyncio.create_task(device.finish(code))
    await polled(github)

    act(github, code.user_code)

    with pytest.raises(ForgeError) as ended:
        await asyncio.wait_for(finishing, WAIT)
    assert ended.value.failure == "credentials" and said in ended.value.message
    assert "/harness connect github" in ended.value.fix and fix in ended.value.fix


async def test_polling_stops_when_the_code_expires_even_if_github_never_says_so(
    github: FakeGitHub, session: aiohttp.ClientSession
) -> None:
    github.device_interval = 5
    # GitHub keeps its own clock: to it the code never expires (and every poll is too soon).
    time = Time()
    device = flow(github, session, time)
    code = await device.start()

    with pytest.raises(ForgeError) as expired:
        await asyncio.wait_for(device.finish(code), WAIT)

    assert "expired" in expired.value.message
    assert sum(time.waits) <= code.expires_in < sum(time.waits) + time.waits[-1] + 5
    assert len([r for r in github.requests if r.path == POLL_PATH]) == len(time.waits)


async def test_waiting_for_the_person_can_be_cancelled(
    github: FakeGitHub, session: aiohttp.ClientSession
) -> None:
    waiting, never = asyncio.Event(), asyncio.Event()

    async def sleep(_: float) -> None:
        waiting.set()
        await never.wait()

    device = DeviceFlow(session, web_url=github.web_url, api_url=github.api_url,
                        client_id=CLIENT_ID, sleep=sleep)  # fmt: skip
    finishing = asyncio.create_task(device.finish(await device.start()))
    await asyncio.wait_for(waiting.wait(), WAIT)

    finishing.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(finishing, WAIT)


async def test_a_failing_github_while_waiting_does_not_lose_the_link(
    github: FakeGitHub, session: aiohttp.ClientSession
) -> None:
    github.fail_next("POST", POLL_PATH, 502, times=2)
    device = flow(github, session)
    code = await device.start()
    finishing = asyncio.create_task(device.finish(code))
    await github.wait_for_request(lambda r: r.path == POLL_PATH and r.status == 200, WAIT)

    github.approve_device(code.user_code, "alice")

    assert (await asyncio.wait_for(finishing, WAIT)).login == "alice"


async def test_an_unknown_client_id_names_the_setting_to_fix(
    github: FakeGitHub, session: aiohttp.ClientSession
) -> None:
    with pytest.raises(ForgeError) as unknown:
        await flow(github, session, client_id="Iv1.nobody").start()

    assert unknown.value.failure == "credentials" and "Iv1.nobody" in unknown.value.message
    assert "`github.clientId`" in unknown.value.fix


async def test_an_unreachable_github_says_where_it_looked(session: aiohttp.ClientSession) -> None:
    async with FakeGitHub() as gone:
        url = gone.web_url
    device = DeviceFlow(session, web_url=url, api_url=url, client_id=CLIENT_ID)

    with pytest.raises(ForgeError) as unreachable:
        await device.start()

    assert unreachable.value.failure == "unavailable" and url in unreachable.value.message
