"""The message shortcut as a request (pure): its text, author and link, in its thread."""

from __future__ import annotations

from bot.parsing import MentionInUnboundThread, NewTask, classify
from bot.surfaces import shortcut_event, shortcut_request


def payload(thread_ts: str | None = None) -> dict[str, object]:
    message: dict[str, object] = {"ts": "5.0", "user": "U2", "text": "the login page is slow"}
    if thread_ts:
        message["thread_ts"] = thread_ts
    return {"type": "message_action", "user": {"id": "U1"}, "channel": {"id": "C1"},
            "message_ts": "5.0", "message": message}  # fmt: skip


def test_the_request_keeps_the_messages_text_author_and_link() -> None:
    request = shortcut_request(" the login page is slow \n", "U2", "https://s/p5")

    assert request == (
        "the login page is slow\n\n(Sent to harness from <@U2>'s message (https://s/p5).)"
    )
    assert shortcut_request("x", None, None).endswith("(Sent to harness from a message.)")


def test_a_top_level_message_starts_its_own_task_by_the_person_who_used_the_shortcut() -> None:
    event = shortcut_event(payload(), "please look", "UBOT")

    decision = classify(event, "UBOT", bound=False)

    assert isinstance(decision, NewTask)
    assert decision.message.user == "U1"
    assert decision.message.text == "please look"
    assert decision.message.thread.thread_ts == "5.0"


def test_a_message_in_a_thread_starts_a_task_there_with_the_threads_earlier_messages() -> None:
    event = shortcut_event(payload(thread_ts="4.0"), "please look", "UBOT")

    decision = classify(event, "UBOT", bound=False)

    assert isinstance(decision, MentionInUnboundThread)
    assert decision.message.thread.thread_ts == "4.0"
