"""The outbox's rules: which failures are worth another try, and how long to wait."""

from __future__ import annotations

from typing import Any

import aiohttp
import pytest
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient
from slack_sdk.web.async_slack_response import AsyncSlackResponse

from bot.outbox import backoff
from bot.poster import classify

NGINX_502 = "<html><head><title>502 Bad Gateway</title></head><body><h1>502 Bad Gateway</h1>"


def api_error(status: int, error: str, data: Any = None) -> SlackApiError:
    """A refused call as slack_sdk raises it; ``data`` (when given) is the body it kept: a
    dict of Slack's JSON, the text of a text/plain page, bytes, or None for an empty body."""
    response = AsyncSlackResponse(
        client=AsyncWebClient(),
        http_verb="POST",
        api_url="https://slack.com/api/chat.update",
        req_args={},
        data={"ok": False, "error": error},
        headers={},
        status_code=status,
    )
    failure = SlackApiError(error, response)  # type: ignore[no-untyped-call]
    if not error:  # slack_sdk cannot describe some of these bodies: put them in afterwards
        response.data = data
    return failure


class RawResponse:
    """What slack_sdk attaches to the error when a body claimed JSON but was not: the aiohttp
    response itself (``status``, no ``data``, no ``get``)."""

    status = 502

    def __repr__(self) -> str:
        return "<ClientResponse 502>"


def not_json_error() -> SlackApiError:
    note = f"Received a response in a non-JSON format: {NGINX_502}"
    return SlackApiError(note, RawResponse())  # type: ignore[no-untyped-call]


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
        # Not Slack's JSON: the page a proxy or Slack's edge answers with.
        (api_error(502, "", NGINX_502), True, "HTTP 502: 502 Bad Gateway 502 Bad Gateway"),
        (api_error(503, "", "upstream connect error"), True, "HTTP 503: upstream connect error"),
        (api_error(502, "", NGINX_502.encode()), True, "HTTP 502: 502 Bad Gateway 502 Bad Gateway"),
        (api_error(500, "", b""), True, "HTTP 500"),
        (api_error(504, "", None), True, "HTTP 504"),
        (api_error(502, "", {}), True, "HTTP 502"),
        (api_error(429, "", "slow down"), True, "HTTP 429: slow down"),
        (api_error(408, "", ""), True, "HTTP 408"),
        (api_error(404, "", "<html><body>Not Found</body></html>"), False, "HTTP 404: Not Found"),
        (api_error(403, "", None), False, "HTTP 403"),
        (not_json_error(), True, "HTTP 502: 502 Bad Gateway 502 Bad Gateway"),
        (SlackApiError("odd", object()), False, "HTTP 200"),  # type: ignore[no-untyped-call]
        (aiohttp.ServerDisconnectedError(), True, "ServerDisconnectedError: Server disconnected"),
        (
            ConnectionResetError(104, "Connection reset by peer"),
            True,
            "ConnectionResetError: [Errno 104] Connection reset by peer",
        ),
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
