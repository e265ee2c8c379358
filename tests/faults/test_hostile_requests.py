"""Hostile and broken requests to ``harness bot --mode http``: each gets a short plain 401
(unsigned, forged, replayed or badly stamped), 400 (signed but malformed) or 413 (too large),
and the bot's log gets one warning line for it: no traceback, no body, no secret. What Slack
really sends (URL and certificate checks, slash commands, even without a response_url) still
works. Then ``check_request``, the pure decision behind it, with literals."""

from __future__ import annotations

import asyncio
import io
import json
import os
import signal
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from urllib.parse import urlencode

import aiohttp
import pytest

from bot.commands import HELP
from bot.http_intake import MAX_BODY, Accepted, Problem, check_request
from bot.testing.slack_emulator import SlackEmulator
from bot.testing.slack_model import sign
from harness.cli.scaffold import init_project
from tests.bot.conftest import BOT_TOKEN, SECRET, WAIT, bot_process

pytestmark = [pytest.mark.anyio]

JSON_TYPE = "application/json"
FORM = "application/x-www-form-urlencoded"
PRIVATE = "the staging password is hunter2"  # in bodies; must never reach the log
FORGED = "v0=" + "0" * 64
SIGNED = "signed"  # Case.signature: Slack's signature of the body
NOW = "now"  # Case.timestamp: the current time, less Case.age


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"  # module scope: one bot process serves every test of this module


@dataclass
class BotLog:
    """The bot's standard error, read as it comes (so the pipe never fills)."""

    lines: list[str] = field(default_factory=list)
    changed: asyncio.Event = field(default_factory=asyncio.Event)

    async def read(self, stream: asyncio.StreamReader) -> None:
        while line := await stream.readline():
            self.lines.append(line.decode("utf-8", errors="replace").rstrip("\n"))
            self.changed.set()

    async def wait_for(self, found: Callable[[list[str]], bool], since: int = 0) -> list[str]:
        """The lines after ``since`` once ``found`` says they are complete (bounded)."""
        async with asyncio.timeout(WAIT):
            while not found(self.lines[since:]):
                self.changed.clear()
                await self.changed.wait()
        return self.lines[since:]


@dataclass
class Bot:
    url: str
    log: BotLog
    session: aiohttp.ClientSession

    async def post(
        self, body: bytes, headers: dict[str, str], *, chunked: bool = False
    ) -> tuple[int, str]:
        # A large body goes as a file (aiohttp warns about large raw bytes), sized all the same.
        data: object = io.BytesIO(body) if len(body) > 65536 else body
        if chunked:

            async def chunks() -> AsyncIterator[bytes]:
                for start in range(0, len(body), 65536):
                    yield body[start : start + 65536]

            data = chunks()
        async with self.session.post(self.url, data=data, headers=headers) as resp:
            return resp.status, await resp.text()


def clean_env(api_url: str) -> dict[str, str]:
    dropped = ("SLACK_", "ANTHROPIC_", "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY")
    env = {k: v for k, v in os.environ.items() if not k.upper().startswith(dropped)}
    env.update(SLACK_BOT_TOKEN=BOT_TOKEN, SLACK_SIGNING_SECRET=SECRET, SLACK_API_URL=api_url)
    return env


@pytest.fixture(scope="module")
async def bot(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Bot]:
    """``harness bot --mode http`` with the shipped config, serving a Slack emulator."""
    folder = tmp_path_factory.mktemp("project")
    init_project(folder)
    # No spare agent: its CLI would start beside the tests, and its "ready" line could land
    # among a test's log lines on a loaded machine (pytest -n).
    with (folder / "config.yaml").open("a", encoding="utf-8") as config:
        config.write("\nspares: {}\n")
    async with (
        SlackEmulator(signing_secret=SECRET, bot_token=BOT_TOKEN) as slack,
        bot_process(folder / "config.yaml", slack, clean_env(slack.api_url)) as process,
        aiohttp.ClientSession() as session,
    ):
        assert process.stderr is not None and slack.bot_url is not None
        log = BotLog()
        reader = asyncio.ensure_future(log.read(process.stderr))
        yield Bot(slack.bot_url, log, session)
        process.send_signal(signal.SIGTERM)
        await asyncio.wait_for(process.wait(), WAIT)
        await asyncio.wait_for(reader, WAIT)
    everything = "\n".join(log.lines)
    assert process.returncode == 0, everything
    assert "Traceback" not in everything


def headers_for(
    body: bytes,
    content_type: str | None = JSON_TYPE,
    *,
    timestamp: str | None = NOW,
    signature: str | None = SIGNED,
    age: int = 0,
) -> dict[str, str]:
    """Headers as Slack would send them, or missing / changed where asked."""
    headers = {"Content-Type": content_type} if content_type else {}
    stamp = str(int(time.time()) - age) if timestamp == NOW else timestamp
    if stamp is not None:
        headers["X-Slack-Request-Timestamp"] = stamp
    if signature == SIGNED:
        signature = sign(SECRET, stamp or "", body)
    if signature is not None:
        headers["X-Slack-Signature"] = signature
    return headers


def event_body(event: object = None, **extra: object) -> bytes:
    if event is None:
        event = {"type": "message", "channel": "D1", "user": "U1", "text": PRIVATE, "ts": "1.1"}
    return json.dumps(
        {"type": "event_callback", "event_id": "EvX", "event": event, **extra}
    ).encode()


def click(**changes: object) -> dict[str, object]:
    """A button click's payload (as the emulator sends it), changed where asked."""
    payload: dict[str, object] = {
        "type": "block_actions",
        "user": {"id": "U1"},
        "channel": {"id": "D1"},
        "container": {"type": "message", "message_ts": "1.2", "channel_id": "D1"},
        "message": {"type": "message", "ts": "1.2", "text": PRIVATE},
        "response_url": "http://127.0.0.1:9/response_url/x",
        "actions": [{"type": "button", "action_id": "harness_answer_0", "value": "q1|0"}],
    }
    payload.update(changes)
    return {k: v for k, v in payload.items() if v is not ...}


def form(**fields: str) -> bytes:
    return urlencode(fields).encode()


def interaction(payload: object) -> bytes:
    return form(payload=json.dumps(payload))


COMMAND = form(command="/harness", text="help", user_id="U1", channel_id="C1", team_id="T1")


@dataclass(frozen=True)
class Case:
    body: bytes
    content_type: str | None = JSON_TYPE
    timestamp: str | None = NOW
    signature: str | None = SIGNED
    age: int = 0

    def headers(self) -> dict[str, str]:
        return headers_for(
            self.body,
            self.content_type,
            timestamp=self.timestamp,
            signature=self.signature,
            age=self.age,
        )


def hostile_cases() -> list[tuple[str, Case, int]]:
    unsigned = {
        "garbage without a signature": Case(b"{not json", timestamp=None, signature=None),
        "garbage with a forged signature": Case(b"{not json", signature=FORGED),
        "an event with a forged signature": Case(event_body(), signature=FORGED),
        "a command with a forged signature": Case(COMMAND, FORM, signature=FORGED),
        "no signature header": Case(event_body(), signature=None),
        "no timestamp header": Case(event_body(), timestamp=None, signature=FORGED),
        "a timestamp that is not a number": Case(event_body(), timestamp="soon"),
        "a negative timestamp": Case(event_body(), timestamp="-1"),
        "a signed event 10 minutes old": Case(event_body(), age=600),
        "a signed event from 10 minutes ahead": Case(event_body(), age=-600),
        "a signature that is not ASCII": Case(event_body(), signature="v0=" + "é" * 64),
        "an empty body without a signature": Case(b"", timestamp=None, signature=None),
        "a body that is not UTF-8": Case(b'{"type": "\xff\xfe"}'),
    }
    malformed = {
        "invalid JSON": Case(b"{not json"),
        "a JSON array": Case(b'[{"type": "event_callback"}]'),
        "a JSON string": Case(b'"event_callback"'),
        "JSON nested past the stack": Case(b"[" * 100_000),
        "an empty body": Case(b""),
        "a body of blanks": Case(b"  \n "),
        "an object without a type": Case(b'{"event": {"type": "message"}}'),
        "a type that is not a string": Case(b'{"type": ["event_callback"]}'),
        "an event that is a string": Case(event_body("message")),
        "an event without a type": Case(event_body({"text": PRIVATE})),
        "an event whose user is a number": Case(event_body({"type": "message", "user": 7})),
        "authorizations that are not a list": Case(event_body(authorizations="T1")),
        "a URL check without a challenge": Case(b'{"type": "url_verification"}'),
        "a text/plain body": Case(event_body(), "text/plain"),
        "a body without a content type": Case(event_body(), None),
        "a form that is neither command nor payload": Case(form(text=PRIVATE), FORM),
        "a payload that is not JSON": Case(form(payload="{" + PRIVATE), FORM),
        "a payload that is a JSON array": Case(interaction([click()]), FORM),
        "a payload without a type": Case(interaction(click(type=...)), FORM),
        "a click whose actions are a string": Case(interaction(click(actions="x")), FORM),
        "a click without actions": Case(interaction(click(actions=[])), FORM),
        "a click whose action has no id": Case(interaction(click(actions=[{"value": "x"}])), FORM),
        "a click whose user is a string": Case(interaction(click(user="U1")), FORM),
        "a click whose channel is a string": Case(interaction(click(channel="D1")), FORM),
        "a click whose container is a list": Case(interaction(click(container=[1])), FORM),
        "a click without a response_url": Case(interaction(click(response_url=...)), FORM),
        "a click whose team is a number": Case(interaction(click(team=5)), FORM),
    }
    return [
        *((name, case, 401) for name, case in unsigned.items()),
        *((name, case, 400) for name, case in malformed.items()),
        ("a body over 1 MiB", Case(b"x" * (MAX_BODY + 1)), 413),
    ]


HOSTILE = hostile_cases()


@pytest.mark.parametrize(("case", "status"), [pytest.param(c, s, id=n) for n, c, s in HOSTILE])
@pytest.mark.subprocess
async def test_a_hostile_request_gets_a_short_answer_and_one_warning_line(
    bot: Bot, case: Case, status: int
) -> None:
    since = len(bot.log.lines)
    got, text = await bot.post(case.body, case.headers())
    assert (got, len(text) < 120, PRIVATE in text) == (status, True, False), text
    refused = f"WARNING bot.http_intake: refused a Slack request: {status} "
    logged = await bot.log.wait_for(lambda new: any(refused in line for line in new), since)
    assert [line for line in logged if refused not in line] == []
    assert len(logged) == 1 and text in logged[0]
    for secret in (PRIVATE, SECRET, BOT_TOKEN, FORGED):
        assert secret not in logged[0]


@pytest.mark.subprocess
async def test_a_chunked_body_over_the_limit_gets_413(bot: Bot) -> None:
    since = len(bot.log.lines)
    body = b"x" * (MAX_BODY + 65536)
    status, _ = await bot.post(body, headers_for(body), chunked=True)
    assert status == 413
    logged = await bot.log.wait_for(bool, since)
    assert logged == [logged[0]] and "refused a Slack request: 413 " in logged[0]


@pytest.mark.subprocess
async def test_url_and_certificate_checks_and_commands_without_response_url_still_work(
    bot: Bot,
) -> None:
    since = len(bot.log.lines)
    challenge = json.dumps({"type": "url_verification", "challenge": "c-123", "token": "t"})
    assert await bot.post(challenge.encode(), headers_for(challenge.encode())) == (
        200,
        '{"challenge": "c-123"}',
    )
    ssl_check = form(ssl_check="1", token="t")
    # Slack's certificate check is answered whether or not it is signed, and reads nothing.
    assert await bot.post(ssl_check, headers_for(ssl_check, FORM)) == (200, "")
    assert await bot.post(ssl_check, headers_for(ssl_check, FORM, signature=None)) == (200, "")

    answers = {}
    for text in ("help", "list", "tasks"):
        body = form(command="/harness", text=text, user_id="U1", channel_id="C1", team_id="T1")
        status, answer = await bot.post(body, headers_for(body, FORM))
        assert status == 200, answer
        # Bolt answers an ack with text alone as plain text, with blocks as JSON.
        answers[text] = json.loads(answer)["text"] if answer.startswith("{") else answer
    assert answers == {
        "help": HELP,
        "list": "No agents are running or queued.",
        "tasks": "No tasks of yours or of your channels yet. Message me, or @mention me in a "
        "channel, to start one.",
    }

    chatter = {"type": "message", "channel": "C1", "channel_type": "channel", "user": "U1"}
    event = event_body({**chatter, "text": "lunch anyone?", "ts": "1700000001.000100"})
    assert await bot.post(event, headers_for(event)) == (200, "")

    def handled(new: list[str]) -> bool:
        commands = sum("INFO bot.app: command /harness from U1 in C1: " in x for x in new)
        return commands == 3 and any(
            "INFO bot.app: event message from U1 in C1: " in x for x in new
        )

    logged = await bot.log.wait_for(handled, since)
    assert not [line for line in logged if " WARNING " in line or " ERROR " in line]


# ------------------------------------------------------------------ the pure decision

NOW_S = 1_700_000_000.0


def check(
    body: bytes,
    content_type: str | None = JSON_TYPE,
    *,
    timestamp: str | None = str(int(NOW_S)),
    signature: str | None = SIGNED,
    secret: str = SECRET,
) -> Accepted | Problem:
    if signature == SIGNED:
        signature = sign(SECRET, timestamp or "", body)
    return check_request(content_type, body, timestamp, signature, signing_secret=secret, now=NOW_S)


def test_signed_requests_of_each_kind_are_accepted_with_their_kind() -> None:
    event = event_body()
    assert check(event) == Accepted("event_callback", event.decode())
    assert check(event, "application/json; charset=utf-8") == Accepted(
        "event_callback", event.decode()
    )
    assert check(COMMAND, FORM) == Accepted("command", COMMAND.decode())
    clicked = interaction(click())
    assert check(clicked, FORM) == Accepted("block_actions", clicked.decode())
    url = b'{"type": "url_verification", "challenge": "c", "token": "t"}'
    assert check(url) == Accepted("url_verification", url.decode())
    limited = b'{"type": "app_rate_limited", "team_id": "T1", "minute_rate_limited": 1}'
    assert check(limited) == Accepted("app_rate_limited", limited.decode())
    assert check(b"ssl_check=1&token=t", FORM, signature=None) == Accepted("ssl_check", "")


def test_the_signature_is_checked_before_the_shape() -> None:
    # Unsigned garbage: 401, whatever its shape.
    assert check(b"[1, 2]", signature=FORGED) == Problem(401, "invalid signature")
    missing = "missing X-Slack-Request-Timestamp or X-Slack-Signature"
    assert check(b"[1, 2]", timestamp=None, signature=None) == Problem(401, missing)
    # The same garbage, signed: 400.
    assert check(b"[1, 2]") == Problem(400, "request body is not a JSON object")


@pytest.mark.parametrize(
    ("timestamp", "reason"),
    [
        ("", "missing X-Slack-Request-Timestamp or X-Slack-Signature"),
        ("soon", "invalid X-Slack-Request-Timestamp"),
        ("1e9", "invalid X-Slack-Request-Timestamp"),
        (" 1700000000", "invalid X-Slack-Request-Timestamp"),
        ("\uff11" * 10, "invalid X-Slack-Request-Timestamp"),  # full-width digits
        (str(int(NOW_S) - 301), "X-Slack-Request-Timestamp is more than 5 minutes off"),
        (str(int(NOW_S) + 301), "X-Slack-Request-Timestamp is more than 5 minutes off"),
    ],
)
def test_a_bad_timestamp_is_401_even_when_signed_with_it(timestamp: str, reason: str) -> None:
    assert check(event_body(), timestamp=timestamp) == Problem(401, reason)


def test_a_request_at_the_edge_of_five_minutes_still_counts() -> None:
    assert isinstance(check(event_body(), timestamp=str(int(NOW_S) - 300)), Accepted)


def test_without_a_signing_secret_nothing_is_accepted() -> None:
    refused = check(event_body(), secret="")
    assert isinstance(refused, Problem) and refused.status == 401


def test_a_non_ascii_signature_is_refused_not_raised() -> None:
    assert check(event_body(), signature="v0=" + "é" * 64) == Problem(401, "invalid signature")


def test_a_body_that_is_not_utf8_is_refused() -> None:
    raw = b'{"type": "\xff"}'
    assert check(raw) == Problem(401, "invalid signature")  # Slack signs text
    # Signed as text by someone holding the secret (the bytes read as U+FFFD): still no.
    signed_as_text = sign(SECRET, str(int(NOW_S)), raw.decode(errors="replace").encode())
    assert check(raw, signature=signed_as_text) == Problem(400, "request body is not UTF-8")


def test_size_is_checked_before_anything_is_read() -> None:
    assert check(b"{" * (MAX_BODY + 1), signature=None) == Problem(413, "request body too large")
    event = event_body()
    assert isinstance(check(b" " * (MAX_BODY - len(event)) + event), Accepted)  # just fits


@pytest.mark.parametrize(
    ("case", "status"), [pytest.param(c, s, id=n) for n, c, s in HOSTILE if s != 401]
)
def test_the_same_hostile_cases_decided_purely(case: Case, status: int) -> None:
    got = check(case.body, case.content_type, timestamp=str(int(NOW_S) - case.age))
    assert isinstance(got, Problem) and got.status == status
    assert PRIVATE not in got.reason and len(got.reason) < 120
