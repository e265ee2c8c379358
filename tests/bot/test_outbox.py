"""The outbox's rules: which failures are worth another try, and how long to wait."""

from __future__ import annotations

import aiohttp
import pytest
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient
from slack_sdk.web.async_slack_response import AsyncSlackResponse

from bot.outbox import backoff
from bot.poster import classify


def api_error(status: int, error: str) -> SlackApiError:
    response = AsyncSlackResponse(
        client=AsyncWebClient(),
        http_verb="POST",
        api_url="https://slack.com/api/chat.update",
        req_args={},
        data={"ok": False, "error": error},
        headers={},
        status_code=status,
    )
    return SlackApiError(error, response)  # type: ignore[no-untyped-call]


@pytest.mark.parametrize(
    ("failure", "transient", "error"),
    [
        (api_error(500, "internal_error"), True, "internal_error"),
        (api_error(503, "anything"), True, "anything"),
        (api_error(429, "ratelimited"), True, "ratelimited"),
        (api_error(200, "fatal_error"), True, "fatal_error"),
        (api_error(200, "service_unavailable"), True, "service_unavailable"),
        (api_error(200, "channel_not_found"), False, "channel_not_found"),
        (api_error(200, "not_in_channel"), False, "not_in_channel"),
        (api_error(200, "invalid_auth"), False, "invalid_auth"),
        (aiohttp.ClientConnectionError("refused"), True, "ClientConnectionError: refused"),
        (TimeoutError(), True, "TimeoutError"),
    ],
)
def test_failures_are_transient_only_when_trying_again_can_help(
    failure: Exception, transient: bool, error: str
) -> None:
    classified = classify(failure)
    assert (classified.transient, classified.error) == (transient, error)


def test_retries_back_off_doubling_up_to_the_limit() -> None:
    assert [backoff(n, 30.0) for n in range(7)] == [1.0, 2.0, 4.0, 8.0, 16.0, 30.0, 30.0]
    assert backoff(10_000, 30.0) == 30.0
    assert backoff(3, 0.1) == 0.1
