"""Slack failing a Web API call every way it can, on every surface the bot uses during a run:
an HTML or text page instead of Slack's JSON (what Slack's edge and proxies answer a 502/503
with, or a proxy's page with a 200), a body that claims JSON but is not, an empty body, bytes,
Slack's own JSON 5xx, a 429 with or without Retry-After, a connection reset, a call that hangs
past the client's timeout. Whatever fails, the person reads the agent's result in the thread,
once and complete, never "Something went wrong", and a transient failure logs no traceback.
A real Bolt app over the emulator."""

from __future__ import annotations

import contextlib
import dataclasses
import logging
from collections.abc import AsyncIterator, Callable
from typing import Literal, Protocol, get_args

import aiohttp
import pytest

from bot.outbox import AgentRef, Outbox, UploadStep
from bot.poster import Poster, SlackClient
from bot.settings import BotOptions
from bot.streaming import START_ATTEMPTS
from bot.testing.slack_emulator import SlackEmulator
from harness.tasks.ledger import SqliteLedger
from harness.tasks.model import ThreadRef
from harness.testing.held_runtime import HeldRuntime
from harness.testing.scripted_model import Script
from tests.bot.conftest import BOT_TOKEN, WAIT, Rig, RigFactory, message_text
from tests.bot.test_slack_surfaces import SAID, talkative

pytestmark = [pytest.mark.anyio, pytest.mark.waits]

# Retries a tenth of a second apart, and a short wait for Slack at shutdown.
FAST = BotOptions(
    status_interval=0.2, delivery_retry_limit=0.1, drain_timeout=1.0, stream_replies=False
)
STREAMING = dataclasses.replace(FAST, stream_replies=True)
CLIENT_TIMEOUT = 1.5  # seconds: a hung call is given up on after this

NGINX_502 = (
    "<html>\r\n<head><title>502 Bad Gateway</title></head>\r\n<body>\r\n"
    "<center><h1>502 Bad Gateway</h1></center>\r\n<hr><center>nginx</center>\r\n"
    "</body>\r\n</html>\r\n"
)
PROXY_LOGIN = "Please sign in to the corporate proxy to continue."
ENVOY_503 = "upstream connect error or disconnect/reset before headers. reset reason: overflow"

Failure = Literal[
    "html 502",
    "text 503",
    "not json 502",
    "empty 500",
    "bytes 502",
    "text 200",
    "json 500",
    "429",
    "429 without Retry-After",
    "reset",
    "timeout",
]
EVERY_FAILURE: tuple[Failure, ...] = get_args(Failure)
# The failures the real run met, and one of each other kind (each surface gets these).
SOME_FAILURES: tuple[Failure, ...] = ("html 502", "text 503", "reset", "timeout")


def inject(slack: SlackEmulator, method: str, failure: Failure, times: int = 1) -> None:
    """The next ``times`` calls of ``method`` fail as ``failure`` says."""
    if failure == "html 502":
        slack.faults.fail_next(method, times, status=502, body=NGINX_502)
    elif failure == "text 503":
        slack.faults.fail_next(method, times, status=503, body=ENVOY_503, content_type="text/plain")
    elif failure == "not json 502":
        slack.faults.fail_next(
            method, times, status=502, body=NGINX_502, content_type="application/json"
        )
    elif failure == "empty 500":
        slack.faults.fail_next(method, times, status=500, body="", content_type="application/json")
    elif failure == "bytes 502":
        slack.faults.fail_next(
            method, times, status=502, body=b"\x1f\x8b\x08", content_type="application/gzip"
        )
    elif failure == "text 200":  # a proxy's sign-in page
        slack.faults.fail_next(
            method, times, status=200, body=PROXY_LOGIN, content_type="text/plain"
        )
    elif failure == "json 500":
        slack.faults.fail_next(method, times, status=500)
    elif failure == "429":
        # slack_sdk waits out a 429 itself (up to rate_limit_retries); more are the bot's.
        slack.faults.fail_next(method, times, status=429, retry_after=0)
    elif failure == "429 without Retry-After":
        slack.faults.fail_next(method, times, status=429, retry_after=None)
    elif failure == "reset":
        # slack_sdk tries a reset connection once more itself: each failure is two resets.
        slack.faults.drop_next(method, 2 * times, how="reset")
    else:
        slack.faults.drop_next(method, times, how="hang")


async def with_short_timeout(r: Rig) -> None:
    """The bot's client gives up on a call after CLIENT_TIMEOUT s (not Slack's 30 s)."""
    old = r.bot.client.session
    timeout = aiohttp.ClientTimeout(total=CLIENT_TIMEOUT)
    r.bot.client.session = aiohttp.ClientSession(timeout=timeout)
    if old is not None:
        await old.close()


def tracebacks(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.exc_info or r.levelno >= logging.ERROR]


Ready = Callable[[Rig], object]


def stream_open(r: Rig) -> object:
    return [c for c in r.slack.calls("chat.startStream") if c.ok]


def status_posted(r: Rig) -> object:
    """The stream was refused every try, and the status message stands in for it."""
    refused = [c for c in r.slack.calls("chat.startStream") if not c.ok]
    return len(refused) >= START_ATTEMPTS and [c for c in r.slack.calls("chat.postMessage") if c.ok]


async def run_to_the_end(
    r: Rig, text: str = "fix the footer", *, ready: Ready | None = None
) -> str:
    """A request in a DM, its (held) agent released once it runs and ``ready(r)`` holds (a
    result sooner than the thread's stream or status message is posted on its own); the
    request's ts, once the thread has its ✅ and the outbox has nothing left to send."""
    asked = str((await r.say(text, channel="D1")).event["ts"])
    if isinstance(r.runtime, HeldRuntime):
        await r.held.wait_started(len(r.held.started) + 1, WAIT)
        if ready is not None:
            await r.slack.wait_for(lambda: ready(r) or None, WAIT)
        r.held.release()
    assert await r.final_reaction("D1", asked) == "white_check_mark"
    await r.bot.outbox.settled(WAIT)
    return asked


def assert_result_shown_once(r: Rig, asked: str, result: str = "did: fix the footer") -> None:
    shown = [message_text(m) for m in r.bot_messages("D1", asked)]
    assert len([t for t in shown if result in t]) == 1, shown
    assert not [t for t in shown if "Something went wrong" in t]
    assert not [t for t in shown if "is working…" in t]  # no status message left behind


class Failing(Protocol):
    def __call__(
        self,
        method: str,
        failure: Failure,
        *,
        times: int = 1,
        options: BotOptions = FAST,
        script: Script | None = None,
    ) -> contextlib.AbstractAsyncContextManager[Rig]: ...


@pytest.fixture
def failing(rig: RigFactory, caplog: pytest.LogCaptureFixture) -> Failing:
    """``async with failing(method, failure, times=...) as r:`` a bot whose next ``times``
    calls of ``method`` fail as ``failure`` says; its agents held (or scripted by
    ``script``). Once it has shut down, no traceback may have been logged."""

    @contextlib.asynccontextmanager
    async def start(
        method: str,
        failure: Failure,
        *,
        times: int = 1,
        options: BotOptions = FAST,
        script: Script | None = None,
    ) -> AsyncIterator[Rig]:
        caplog.set_level(logging.INFO)
        runtime = HeldRuntime() if script is None else None
        async with rig(script, runtime=runtime, options=options) as r:
            if failure == "timeout":
                await with_short_timeout(r)
            inject(r.slack, method, failure, times)
            yield r
        assert tracebacks(caplog) == []

    return start


async def survives(
    failing: Failing,
    method: str,
    failure: Failure,
    *,
    times: int,
    options: BotOptions = FAST,
    ready: Ready | None = None,
) -> Rig:
    async with failing(method, failure, times=times, options=options) as r:
        asked = await run_to_the_end(r, ready=ready)
        failed = [c for c in r.slack.calls(method) if not c.ok]
        assert_result_shown_once(r, asked)
    assert failed, f"{method} never failed"
    return r


# A surface whose failures cost that surface at most, how many of its calls fail in a row,
# and what the person misses meanwhile.
SURFACES: tuple[tuple[str, int, tuple[Failure, ...]], ...] = (
    # "is reading your message…", the agent's status, and its clearing, all fail.
    ("assistant.threads.setStatus", 3, EVERY_FAILURE),
    # The result's edit is retried until Slack takes it.
    ("chat.update", 2, EVERY_FAILURE),
    # The status message is not posted; the result's own post fails once and is retried.
    ("chat.postMessage", 2, EVERY_FAILURE),
    # 👀 is not added; the ✅ fails once and is retried (run_to_the_end waits for it).
    ("reactions.add", 2, SOME_FAILURES),
)


@pytest.mark.parametrize(
    ("method", "times", "failure"),
    [
        pytest.param(method, times, failure, id=f"{method}-{failure}")
        for method, times, failures in SURFACES
        for failure in failures
    ],
)
async def test_a_surface_failing_leaves_the_result_to_arrive(
    failing: Failing, method: str, times: int, failure: Failure
) -> None:
    await survives(failing, method, failure, times=times)


@pytest.mark.parametrize("failure", EVERY_FAILURE)
async def test_a_stream_slack_fails_to_open_once_opens_on_the_next_try_with_the_result(
    failing: Failing, failure: Failure
) -> None:
    r = await survives(
        failing, "chat.startStream", failure, times=1, options=STREAMING, ready=stream_open
    )
    assert [c for c in r.slack.calls("chat.startStream") if c.ok]
    assert [c for c in r.slack.calls("chat.stopStream") if c.ok]


@pytest.mark.parametrize("failure", SOME_FAILURES)
async def test_a_stream_slack_keeps_failing_to_open_falls_back_to_a_status_message_and_the_result(
    failing: Failing, failure: Failure
) -> None:
    r = await survives(
        failing,
        "chat.startStream",
        failure,
        times=START_ATTEMPTS,
        options=STREAMING,
        ready=status_posted,
    )
    assert not [c for c in r.slack.calls("chat.startStream") if c.ok]
    assert r.slack.calls("chat.update")  # the status message became the result


@pytest.mark.parametrize("failure", SOME_FAILURES)
async def test_closing_the_stream_is_retried_until_slack_takes_the_result(
    failing: Failing, failure: Failure
) -> None:
    r = await survives(
        failing, "chat.stopStream", failure, times=2, options=STREAMING, ready=stream_open
    )
    assert [c for c in r.slack.calls("chat.stopStream") if c.ok]


@pytest.mark.parametrize("failure", SOME_FAILURES)
async def test_the_home_tab_failing_to_publish_is_logged_and_the_next_opening_shows_it(
    failing: Failing, failure: Failure
) -> None:
    async with failing("views.publish", failure) as r:
        await r.slack.agent.app_home_opened("U1")
        await r.slack.wait_for(
            lambda: [c for c in r.slack.calls("views.publish") if not c.ok] or None, WAIT
        )
        asked = await run_to_the_end(r)
        await r.slack.agent.app_home_opened("U1")
        view = await r.slack.wait_for(lambda: r.slack.agent.home_view("U1"), WAIT)
        assert_result_shown_once(r, asked)

    assert view["type"] == "home"


@pytest.mark.slow
@pytest.mark.parametrize("failure", ["html 502", "text 503", "reset"])
async def test_appends_slack_fails_to_take_are_sent_with_the_next_and_the_result_arrives(
    failing: Failing, failure: Failure
) -> None:
    appends = "chat.appendStream"
    async with failing(appends, failure, times=2, options=STREAMING, script=talkative) as r:
        asked = await run_to_the_end(r, "add a dark mode toggle")
        [stream] = r.slack.agent.streams("D1", asked)
        failed = [c for c in r.slack.calls(appends) if not c.ok]
        assert_result_shown_once(r, asked, "added the dark mode toggle")

    assert failed
    assert stream.state == "stopped"
    for said in SAID:  # nothing the agent said was lost or repeated
        assert stream.text.count(said) == 1


@pytest.mark.parametrize(
    "method", ["files.getUploadURLExternal", "upload", "files.completeUploadExternal"]
)
@pytest.mark.parametrize("failure", SOME_FAILURES)
async def test_a_diff_upload_slack_fails_is_retried_and_shared_once(
    slack: SlackEmulator, caplog: pytest.LogCaptureFixture, method: str, failure: Failure
) -> None:
    caplog.set_level(logging.INFO)
    slack.delivery = "none"
    asked = (await slack.user_message("U1", "D1", "fix the footer")).event["ts"]
    thread = ThreadRef("D1", asked)
    given_up: list[str] = []

    async def read_diff(task_slug: str, agent_id: str) -> str:
        return "diff --git a/x b/x\n+" + "x" * 50_000

    async def on_given_up(agent: AgentRef, reason: str) -> None:
        given_up.append(reason)

    timeout = aiohttp.ClientTimeout(total=CLIENT_TIMEOUT)
    async with aiohttp.ClientSession(timeout=timeout) as session:
        client = SlackClient(token=BOT_TOKEN, base_url=slack.api_url, session=session)
        ledger = await SqliteLedger.open(None)
        outbox = Outbox(ledger, client, Poster(client), read_diff=read_diff,
                        on_given_up=on_given_up, max_delay=0.1)  # fmt: skip
        outbox.start()
        try:
            inject(slack, method, failure, times=2)
            step: UploadStep = {"op": "upload", "task_slug": "fix-the-footer",
                                "agent_id": "a1", "filename": "a1.diff", "title": "the diff",
                                "comment": "The full diff."}  # fmt: skip
            await outbox.owe(
                thread, [step], agent={"task_slug": "fix-the-footer", "agent_id": "a1"}
            )
            await outbox.settled(WAIT)
        finally:
            await outbox.stop(1.0)
            await ledger.close()

    shared = [m for m in slack.thread("D1", asked) if m.get("files")]
    assert len(shared) == 1
    assert slack.uploaded(shared[0]["files"][0]["id"]).startswith(b"diff --git")
    assert not [m for m in slack.thread("D1", asked) if "could not be attached" in str(m)]
    assert [c for c in slack.calls(method) if not c.ok]
    assert given_up == []
    assert tracebacks(caplog) == []
