"""Access rules, settings, de-duplication and thread lanes."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import pytest

from bot.access import CHANNEL_REFUSAL, REFUSAL, Refusal, check_access
from bot.background import Background
from bot.dedupe import TtlSet
from bot.settings import DEFAULT_API_URL, SlackEnv, check_token_shapes, choose_mode
from bot.threads import ThreadIndex, ThreadLanes
from harness.config.settings import SlackSettings
from harness.errors import HarnessError
from harness.tasks.model import TaskSummary, ThreadRef

OPEN = SlackSettings()
CLOSED = SlackSettings(allowed_users=("U1",), allowed_channels=("C1",), admins=("UADMIN",))


def test_empty_allowlists_let_everyone_in_everywhere() -> None:
    assert check_access(OPEN, "U9", "C9", is_dm=False) is None


@pytest.mark.parametrize(
    ("user", "channel", "is_dm", "refusal"),
    [
        ("U1", "C1", False, None),
        ("U1", "D7", True, None),  # DMs are governed by the user allowlist alone
        ("UADMIN", "C1", False, None),
        ("U2", "C1", False, REFUSAL),
        ("U2", "D2", True, REFUSAL),
        ("U1", "C2", False, CHANNEL_REFUSAL),
    ],
)
def test_allowlists(user: str, channel: str, is_dm: bool, refusal: str | None) -> None:
    expected = Refusal(refusal) if refusal else None
    assert check_access(CLOSED, user, channel, is_dm=is_dm) == expected


def test_settings_from_the_environment_never_show_tokens() -> None:
    env = SlackEnv.from_environ(
        {"SLACK_BOT_TOKEN": "xoxb-secret", "SLACK_API_URL": "http://127.0.0.1:9/api"}
    )
    assert env.api_url == "http://127.0.0.1:9/api/"
    assert "xoxb-secret" not in repr(env)
    assert SlackEnv.from_environ({}).api_url == DEFAULT_API_URL


def test_the_mode_follows_the_tokens_unless_forced() -> None:
    both = SlackEnv(bot_token="b", app_token="a", signing_secret="s")
    assert choose_mode(both, None) == "socket"
    assert choose_mode(both, "http") == "http"
    assert choose_mode(SlackEnv(bot_token="b", signing_secret="s"), None) == "http"
    with pytest.raises(HarnessError, match="SLACK_BOT_TOKEN"):
        choose_mode(SlackEnv(signing_secret="s"), None)
    with pytest.raises(HarnessError, match="SLACK_SIGNING_SECRET"):
        choose_mode(SlackEnv(bot_token="b"), None)
    with pytest.raises(HarnessError, match="SLACK_APP_TOKEN"):
        choose_mode(SlackEnv(bot_token="b", signing_secret="s"), "socket")


def test_ttl_set_forgets_after_its_ttl() -> None:
    now = [0.0]
    seen = TtlSet(10.0, clock=lambda: now[0], max_size=3)
    assert seen.add("a") and not seen.add("a")
    now[0] = 9.9
    assert "a" in seen
    now[0] = 10.0
    assert "a" not in seen and seen.add("a")
    for key in "bcd":
        seen.add(key)
    assert "a" not in seen  # the oldest goes first when full


def test_thread_index_reserves_binds_and_releases() -> None:
    index = ThreadIndex()
    bound = ThreadRef("C1", "1.1")
    index.load([TaskSummary("t", "c", "d", dispatch_count=0, thread=bound)])
    assert index.is_bound(bound) and index.slug(bound) == "t"
    fresh = ThreadRef("D1", "2.2")
    index.reserve(fresh)
    assert index.is_bound(fresh) and index.slug(fresh) is None
    index.release(fresh)
    assert not index.is_bound(fresh)
    index.release(bound)  # bound threads are not released
    assert index.slug(bound) == "t"


@pytest.mark.anyio
async def test_thread_lanes_run_jobs_of_a_thread_one_at_a_time_in_order() -> None:
    background = Background()
    lanes = ThreadLanes(background)
    thread, other = ThreadRef("C1", "1.1"), ThreadRef("C1", "2.2")
    gate, other_done = asyncio.Event(), asyncio.Event()
    order: list[str] = []

    def job(name: str, wait: bool = False) -> Callable[[], Awaitable[None]]:
        async def run() -> None:
            order.append(f"start {name}")
            if wait:
                await gate.wait()
            order.append(f"end {name}")
            if name == "other":
                other_done.set()

        return run

    lanes.enqueue(thread, job("first", wait=True), name="first")
    lanes.enqueue(thread, job("second"), name="second")
    lanes.enqueue(other, job("other"), name="other")
    assert lanes.busy(thread)
    await asyncio.wait_for(other_done.wait(), 5)
    assert order == ["start first", "start other", "end other"]
    gate.set()
    await background.drain(5)
    assert order[3:] == ["end first", "start second", "end second"]
    assert not lanes.busy(thread)


def test_token_shapes_are_checked_without_showing_the_secret() -> None:
    check_token_shapes(SlackEnv(bot_token="xoxb-1", app_token="xapp-1"))
    check_token_shapes(SlackEnv())  # what is missing is choose_mode's to say
    with pytest.raises(HarnessError) as swapped:
        check_token_shapes(SlackEnv(bot_token="xoxb-1", app_token="xoxb-2-topsecret"))
    with pytest.raises(HarnessError) as mangled:
        check_token_shapes(SlackEnv(bot_token="Bearer xoxb-topsecret"))

    assert "SLACK_APP_TOKEN holds a token shaped like SLACK_BOT_TOKEN" in str(swapped.value)
    assert "starts with 'Beare', not 'xoxb-'" in str(mangled.value)
    assert "topsecret" not in str(swapped.value) + str(mangled.value)
    assert swapped.value.fix is not None and "export SLACK_APP_TOKEN=xapp-" in swapped.value.fix


def test_a_token_given_as_the_signing_secret_is_named_without_showing_it() -> None:
    check_token_shapes(SlackEnv(bot_token="xoxb-1", signing_secret="8f14e45fceea167a5a36dedd"))
    with pytest.raises(HarnessError) as caught:
        check_token_shapes(SlackEnv(bot_token="xoxb-1", signing_secret="xoxb-2-topsecret"))

    assert "SLACK_SIGNING_SECRET holds a Slack token (xoxb-...)" in caught.value.message
    assert "Signing Secret" in caught.value.fix and "topsecret" not in str(caught.value)
