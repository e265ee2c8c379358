"""The bot's log as its operators read it: one INFO line per Slack request it handled (kind,
user, channel, decision, milliseconds), never a token, a secret or a message's text; and
``harness bot -v --log-file F`` writing there, with the Slack SDK's debug dumps left out."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import re
import signal
from pathlib import Path

import pytest

from bot.testing.slack_emulator import SlackEmulator
from harness.testing.held_runtime import HeldRuntime
from tests.bot.conftest import APP_TOKEN, BOT_TOKEN, SECRET, Rig, RigFactory, bot_process

pytestmark = pytest.mark.anyio

WAIT = 10.0
PRIVATE = "the staging password is hunter2"
LINE = re.compile(
    r"^(?P<kind>.+) from (?P<user>\S+) in (?P<channel>\S+): (?P<outcome>.+) \(\d+\.\d ms\)$"
)


def request_lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.name == "bot.app" and r.levelno == logging.INFO and LINE.match(r.getMessage())
    ]


def fields(line: str) -> dict[str, str]:
    match = LINE.match(line)
    assert match is not None, line
    return match.groupdict()


async def eyes_on(r: Rig, channel: str, ts: str) -> None:
    await r.slack.wait_for(lambda: "eyes" in r.slack.reactions(channel, ts), WAIT)


async def test_each_event_command_and_click_logs_one_info_line_without_secrets(
    rig: RigFactory, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)  # what `harness bot` logs by default
    async with rig(runtime=HeldRuntime()) as r:
        dm = await r.say(f"fix the login bug, {PRIVATE}")
        await eyes_on(r, "D1", dm.event["ts"])
        [line] = request_lines(caplog)
        assert fields(line) == {
            "kind": "event message",
            "user": "U1",
            "channel": "D1",
            "outcome": "new task",
        }

        await r.slack.slash_command("/harness", "help", "U2", "C1")
        assert fields(request_lines(caplog)[1]) == {
            "kind": "command /harness",
            "user": "U2",
            "channel": "C1",
            "outcome": "help",
        }

        # A mention is two requests (message + app_mention), and a retry is one more.
        mention = await r.say(f"<@UBOT> review the parser, {PRIVATE}", user="U3", channel="C1")
        await r.slack.deliver_event(mention.event, retry_of=mention)
        await eyes_on(r, "C1", mention.event["ts"])
        reply = await r.say("and the lexer", user="U3", channel="C1", thread_ts=mention.event["ts"])
        await eyes_on(r, "C1", reply.event["ts"])
        outcomes = [(f["kind"], f["outcome"]) for f in map(fields, request_lines(caplog)[2:])]
        assert outcomes == [
            ("event message", "new task"),
            ("event app_mention", "ignored: message already handled"),
            ("event message", "ignored: duplicate delivery"),
            ("event message", "follow-up"),
        ]

        # An agent's question, answered with a button.
        await r.held.wait_started(2, WAIT)
        [agent_id] = [s.agent_id for s in r.held.started if "login" in s.prompt]
        asking = asyncio.ensure_future(
            r.orchestrator.humans.ask_human(agent_id, "Which database?", ("Postgres", "SQLite"), 30)
        )
        [question] = await r.slack.wait_for(
            lambda: [m for m in r.bot_messages("D1", dm.event["ts"]) if "asks:" in m["text"]],
            WAIT,
        )
        button = question["blocks"][1]["elements"][0]
        await r.slack.block_action("U1", "D1", question["ts"], button["action_id"], button["value"])
        _, answer = await asyncio.wait_for(asking, WAIT)
        assert answer is not None and answer.text == "Postgres"
        click = fields(request_lines(caplog)[-1])
        assert (click["kind"], click["user"], click["channel"]) == (
            "action harness_answer_0",
            "U1",
            "D1",
        )
        assert click["outcome"].startswith("answered question ")
        assert len(request_lines(caplog)) == 7

    everything = caplog.text
    for secret in (BOT_TOKEN, APP_TOKEN, SECRET, PRIVATE):
        assert secret not in everything


async def test_a_request_with_a_bad_signature_is_logged_without_its_body_or_signature(
    rig: RigFactory, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    forged = "v0=" + "0" * 64
    event = {"channel": "D1", "channel_type": "im", "user": "U1", "text": PRIVATE, "ts": "1.1"}
    body = {"type": "event_callback", "event_id": "EvFORGED", "event": {"type": "message", **event}}
    async with rig(runtime=HeldRuntime()) as r:
        status, _ = await r.slack.post_signed(
            json.dumps(body).encode(), content_type="application/json", signature_override=forged
        )
        assert status == 401
    assert "refused a Slack request: 401 invalid signature" in caplog.text
    assert PRIVATE not in caplog.text
    assert forged not in caplog.text
    assert request_lines(caplog) == []  # rejected before any listener: not a handled request


@pytest.mark.subprocess
async def test_harness_bot_with_v_and_log_file_logs_there_without_slack_sdk_dumps(
    project_dir: Path, slack: SlackEmulator, tmp_path: Path
) -> None:
    log = tmp_path / "bot.log"
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLACK_")}
    env.update(SLACK_BOT_TOKEN=BOT_TOKEN, SLACK_SIGNING_SECRET=SECRET, SLACK_API_URL=slack.api_url)
    config = project_dir / "config.yaml"
    async with bot_process(config, slack, env, "-v", "--log-file", str(log)) as bot:
        chatter = await slack.user_message("U1", "C1", f"lunch anyone? {PRIVATE}")
        helped = await slack.slash_command("/harness", "help", "U1", "C1")
        assert (chatter.status, helped.status) == (200, 200)
        bot.send_signal(signal.SIGTERM)
        _, errors = await asyncio.wait_for(bot.communicate(), WAIT)
    assert bot.returncode == 0, errors.decode()
    assert " INFO " not in errors.decode() and " DEBUG " not in errors.decode()

    written = log.read_text("utf-8")
    lines = written.splitlines()
    assert any(" INFO bot.app: event message from U1 in C1: ignored: " in x for x in lines)
    assert any(" INFO bot.app: command /harness from U1 in C1: help (" in x for x in lines)
    assert any(" DEBUG harness." in x for x in lines)  # -v: the harness's own debug lines
    # Debug lines of the harness's and the bot's own loggers only: no library's.
    assert [x for x in lines if re.search(r" DEBUG (?!(harness|bot)\.)", x)] == []
    assert "Responding with status" not in written  # Bolt's response dump
    for secret in (BOT_TOKEN, SECRET, PRIVATE):
        assert secret not in written
