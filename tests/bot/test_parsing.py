"""Classifying Slack events and /harness text: pure functions over literals."""

from __future__ import annotations

from typing import Any

import pytest

from bot.parsing import (
    BadCommand,
    Command,
    EarlierMessage,
    FollowUp,
    Ignore,
    IgnoreKind,
    MentionInUnboundThread,
    NewTask,
    UserMessage,
    classify,
    earlier_messages,
    parse_command,
    parse_message_event,
    strip_mention,
    thread_task_description,
)
from harness.tasks.model import ThreadRef

BOT = "UBOT"
PARENT = "1699999999.000100"
NOT_AN_ID = "`x&amp;y` is not an agent id; ids look like `a1b2c3` (see `/harness list`)."


def event(**fields: Any) -> dict[str, Any]:
    base = {"type": "message", "channel": "C1", "channel_type": "channel", "user": "U1"}
    return {**base, "text": "hello", "ts": "1700000000.000100", **fields}


def dm(**fields: Any) -> dict[str, Any]:
    return event(channel="D1", channel_type="im", **fields)


def test_a_top_level_dm_is_a_new_task() -> None:
    decision = classify(dm(text="fix the bug"), BOT, bound=False)
    assert isinstance(decision, NewTask)
    assert decision.message.thread == ThreadRef("D1", "1700000000.000100")
    assert decision.message.text == "fix the bug"


def test_a_top_level_mention_in_a_channel_is_a_new_task_without_the_mention() -> None:
    decision = classify(event(text="<@UBOT> plan: dark mode"), BOT, bound=False)
    assert isinstance(decision, NewTask)
    assert decision.message.text == "plan: dark mode"
    assert decision.message.mentioned and not decision.message.is_dm


def test_an_app_mention_event_has_no_channel_type_and_is_still_a_mention() -> None:
    mention = {k: v for k, v in event(text="<@UBOT> hi").items() if k != "channel_type"}
    mention["type"] = "app_mention"
    decision = classify(mention, BOT, bound=False)
    assert isinstance(decision, NewTask) and not decision.message.is_dm


@pytest.mark.parametrize(
    ("fields", "bound", "kind"),
    [
        ({"thread_ts": "1699999999.000100"}, True, FollowUp),
        ({"thread_ts": "1699999999.000100", "channel": "D1", "channel_type": "im"}, True, FollowUp),
        (
            {"thread_ts": "1699999999.000100", "text": "<@UBOT> do it"},
            False,
            MentionInUnboundThread,
        ),
        ({"thread_ts": "1699999999.000100", "text": "<@UBOT> do it"}, True, FollowUp),
    ],
)
def test_thread_replies(fields: dict[str, Any], bound: bool, kind: type[object]) -> None:
    assert isinstance(classify(event(**fields), BOT, bound=bound), kind)


@pytest.mark.parametrize(
    ("fields", "bound", "kind", "reason"),
    [
        ({"bot_id": "B9"}, False, "not for the bot", "bot message"),
        ({"subtype": "bot_message"}, False, "not for the bot", "bot message"),
        ({"user": "UBOT", "channel": "D1", "channel_type": "im"}, False, "not for the bot",
         "bot message"),
        ({"subtype": "message_changed"}, False, "not for the bot", "edit"),
        ({"subtype": "message_deleted"}, False, "not for the bot", "deletion"),
        ({"subtype": "channel_join", "text": "<@UBOT>"}, False, "not for the bot",
         "message subtype 'channel_join'"),
        ({}, False, "not for the bot", "top-level channel message without a mention"),
        ({"thread_ts": PARENT}, False, "not for the bot", "unbound thread without a mention"),
        ({"text": "<@UBOT>"}, False, "empty", "empty message"),
        ({"text": "<@UBOT> model:opus"}, False, "directives only", "directives and no request"),
        ({"text": "plan first:", "thread_ts": PARENT}, True, "directives only",
         "directives and no request"),
        ({"text": "<@UBOT> again"}, True, "already handled", "message already handled"),
        ({"user": ""}, False, "not for the bot", "no user, channel or ts"),
    ],
)  # fmt: skip
def test_ignored_events_say_why(
    fields: dict[str, Any], bound: bool, kind: IgnoreKind, reason: str
) -> None:
    assert classify(event(**fields), BOT, bound=bound) == Ignore(kind, reason)


def test_user_text_is_unescaped_and_file_shares_count() -> None:
    parsed = parse_message_event(dm(text="a &lt;b&gt; &amp;amp;", subtype="file_share"), BOT)
    assert isinstance(parsed, UserMessage)
    assert parsed.text == "a <b> &amp;"


def test_strip_mention() -> None:
    assert strip_mention("<@UBOT>: plan it", BOT) == "plan it"
    assert strip_mention("hey <@UBOT|harness>, review <@U2>'s PR", BOT) == "hey , review <@U2>'s PR"
    assert strip_mention("  <@UBOT>  ", BOT) == ""


def test_thread_context_keeps_the_request_first_and_the_newest_messages() -> None:
    replies = [
        {"ts": "1.000100", "user": "U2", "text": "export is broken"},
        {"ts": "1.000200", "user": "UBOT", "bot_id": "B1", "text": "noted"},
        {"ts": "1.000300", "user": "U1", "text": "<@UBOT> fix it"},
        {"ts": "1.000400", "user": "U3", "text": "later"},
    ]
    earlier = earlier_messages(replies, "1.000300", BOT)
    assert earlier == [EarlierMessage("U2", "export is broken"), EarlierMessage("the bot", "noted")]
    text = thread_task_description("fix it", earlier)
    assert text == (
        "fix it\n\nEarlier messages in this Slack thread:\n- U2: export is broken\n- the bot: noted"
    )
    long = [EarlierMessage("U2", "x" * 50) for _ in range(5)]
    cut = thread_task_description("go", long, budget_chars=120)
    assert "(3 earlier message(s) left out)" in cut and cut.count("- U2:") == 2
    assert thread_task_description("", []).startswith("Work on what the earlier messages")


@pytest.mark.parametrize(
    ("text", "parsed"),
    [
        ("", Command("help")),
        ("help", Command("help")),
        ("  LIST ", Command("list")),
        ("tasks", Command("tasks")),
        ("kill a1b2c3", Command("kill", "a1b2c3")),
        ("kill `A1B2C3`", Command("kill", "a1b2c3")),
        ("kill", BadCommand("Usage: `/harness kill <agentId>` (the ids are in `/harness list`).")),
        (
            "kill x&y",
            BadCommand(
                "`x&amp;y` is not an agent id; ids look like `a1b2c3` (see `/harness list`)."
            ),
        ),
        ("dance <now>", BadCommand("Unknown command `dance`.")),
    ],
)
def test_parse_command(text: str, parsed: Command | BadCommand) -> None:
    assert parse_command(text) == parsed


@pytest.mark.parametrize("text", ["\u200b\u200b", "<@UBOT> \u2060\ufeff", "\u3164 \u200d"])
def test_a_message_of_invisible_characters_only_is_said_to_be_unseen(text: str) -> None:
    assert classify(dm(text=text), BOT, bound=False) == Ignore(
        "invisible", "a message of invisible characters only"
    )
    assert classify(event(text=text, thread_ts=PARENT), BOT, bound=True) == Ignore(
        "invisible", "a message of invisible characters only"
    )


def test_a_request_past_slacks_limit_is_cut_and_the_agent_is_told_how_much() -> None:
    message = parse_message_event(dm(text="x" * 40_010), BOT)

    assert isinstance(message, UserMessage)
    assert message.cut == 10
    assert message.text.startswith("x" * 40_000 + "\n\n")
    assert message.text.endswith(
        "[The request was cut here: 10 more characters were not received.]"
    )
    whole = parse_message_event(dm(text="y" * 40_000), BOT)
    assert isinstance(whole, UserMessage) and (whole.cut, whole.text) == (0, "y" * 40_000)


@pytest.mark.parametrize(
    ("text", "parsed"),
    [
        ("connect github", Command("connect", forge="github")),
        ("Connect `GitHub`", Command("connect", forge="github")),
        ("disconnect github", Command("disconnect", forge="github")),
        ("connect", "Usage: `/harness connect github` (links your GitHub account"),
        ("connect gitlab", "Usage: `/harness connect github`"),
        ("disconnect github now", "Usage: `/harness disconnect github` (unlinks it"),
    ],
)
def test_connect_and_disconnect_name_the_forge(text: str, parsed: Command | str) -> None:
    found = parse_command(text)
    if isinstance(parsed, Command):
        assert found == parsed
    else:
        assert isinstance(found, BadCommand) and found.message.startswith(parsed)
