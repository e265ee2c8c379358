"""The bot's settings from the environment, and how it connects to Slack.

``SLACK_BOT_TOKEN`` (xoxb-), ``SLACK_APP_TOKEN`` (xapp-, Socket Mode), ``SLACK_SIGNING_SECRET``
(HTTP mode) and ``SLACK_API_URL`` (default https://slack.com/api/, the base of every Web API
call). Tokens are kept out of ``repr`` so they never reach a log line.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from harness.errors import HarnessError

DEFAULT_API_URL = "https://slack.com/api/"
Mode = Literal["socket", "http"]


@dataclass(frozen=True)
class SlackEnv:
    bot_token: str | None = field(default=None, repr=False)
    app_token: str | None = field(default=None, repr=False)
    signing_secret: str | None = field(default=None, repr=False)
    api_url: str = DEFAULT_API_URL

    @classmethod
    def from_environ(cls, environ: Mapping[str, str]) -> SlackEnv:
        def value(name: str) -> str | None:
            return environ.get(name, "").strip() or None

        return cls(
            bot_token=value("SLACK_BOT_TOKEN"),
            app_token=value("SLACK_APP_TOKEN"),
            signing_secret=value("SLACK_SIGNING_SECRET"),
            api_url=normalize_api_url(value("SLACK_API_URL") or DEFAULT_API_URL),
        )


def normalize_api_url(url: str) -> str:
    """slack_sdk joins the method name straight onto the base: it must end with a slash."""
    return url if url.endswith("/") else url + "/"


_SHAPES = (
    ("SLACK_BOT_TOKEN", "xoxb-", "the Bot User OAuth Token, under OAuth & Permissions"),
    ("SLACK_APP_TOKEN", "xapp-", "an app-level token with connections:write, under Basic "
     "Information > App-Level Tokens"),
)  # fmt: skip


def check_token_shapes(env: SlackEnv) -> None:
    """Each token looks like what its variable holds (and the signing secret is no token);
    checked before any network call, so a swapped or mangled token is named with its fix
    instead of surfacing as Slack's `invalid_auth`. Never shows more of a secret than its
    first five characters."""
    given = {"SLACK_BOT_TOKEN": env.bot_token, "SLACK_APP_TOKEN": env.app_token}
    for name, prefix, where in _SHAPES:
        token = given[name]
        if token is None or token.startswith(prefix):
            continue
        other = next((n for n, p, _ in _SHAPES if n != name and token.startswith(p)), None)
        problem = (
            f"{name} holds a token shaped like {other} ({token[:5]}...): the two look swapped"
            if other
            else f"{name} does not look like a Slack token of its kind: it starts with "
            f"{token[:5]!r}, not {prefix!r}"
        )
        raise HarnessError(problem, fix=f"export {name}={prefix}... ({where} in the app's "
                           "settings at api.slack.com/apps)")  # fmt: skip
    secret = env.signing_secret
    if secret is not None and secret.startswith(("xox", "xapp-")):
        raise HarnessError(
            f"SLACK_SIGNING_SECRET holds a Slack token ({secret[:5]}...), not the app's "
            "signing secret",
            fix="export SLACK_SIGNING_SECRET=... (Basic Information > App Credentials > Signing "
            "Secret in the app's settings at api.slack.com/apps)",
        )


def choose_mode(env: SlackEnv, forced: Mode | None) -> Mode:
    """Socket Mode when SLACK_APP_TOKEN is set (or forced), else HTTP; fails fast when the
    chosen mode lacks what it needs."""
    mode: Mode = forced or ("socket" if env.app_token else "http")
    if not env.bot_token:
        raise HarnessError(
            "SLACK_BOT_TOKEN is not set",
            fix="export SLACK_BOT_TOKEN=xoxb-... (the app's Bot User OAuth Token)",
        )
    if mode == "socket" and not env.app_token:
        raise HarnessError(
            "Socket Mode needs SLACK_APP_TOKEN",
            fix="export SLACK_APP_TOKEN=xapp-... (an app-level token with connections:write), "
            "or run with --mode http",
        )
    if mode == "http" and not env.signing_secret:
        raise HarnessError(
            "HTTP mode needs SLACK_SIGNING_SECRET",
            fix="export SLACK_SIGNING_SECRET=... (Basic Information > Signing Secret), or set "
            "SLACK_APP_TOKEN for Socket Mode",
        )
    return mode


@dataclass(frozen=True)
class BotOptions:
    """Tunables of the bot's behaviour (tests shorten the intervals)."""

    # How often a status message is edited while its agent works (Slack-friendly: ~1 per 2.5 s).
    status_interval: float = 2.5
    # Stream each agent's reply into its thread (chat.startStream); off, or where Slack
    # refuses streaming, a status message is edited instead.
    stream_replies: bool = True
    # How long deliveries are remembered, across restarts too (Slack retries for an hour).
    dedupe_ttl: float = 7200.0
    # On shutdown, how long to wait for the bot's own work (final posts) before cancelling it.
    drain_timeout: float = 15.0
    # How many recent tasks `/harness tasks` shows.
    recent_tasks: int = 10
    # Retries of a rate-limited (HTTP 429) Web API call, each after its Retry-After.
    rate_limit_retries: int = 5
    # The longest wait between two tries of a message Slack did not take (1 s, 2 s, 4 s, ...).
    delivery_retry_limit: float = 30.0
