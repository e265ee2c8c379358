"""`review <url>` to the bot, and `/harness review <url>`: what counts as asking for a review."""

from __future__ import annotations

import pytest

from bot.parsing import BadCommand, Command, parse_command, review_request

URL = "https://github.com/acme/web/pull/12"


@pytest.mark.parametrize(
    "text", [f"review <{URL}>", f"review {URL}", f"Review <{URL}|acme/web#12>  ", f"review\t{URL}"]
)
def test_review_and_a_link_as_slack_sends_it_asks_for_a_review(text: str) -> None:
    assert review_request(text) == URL


@pytest.mark.parametrize(
    "text",
    ["review: the changes on this branch", f"review {URL} and fix what you find", f"see {URL}"],
)
def test_anything_more_or_else_is_a_task_as_usual(text: str) -> None:
    assert review_request(text) is None


def test_the_command_takes_the_url_and_says_how_without_one() -> None:
    assert parse_command(f"review <{URL}>") == Command("review", url=URL)
    usage = parse_command("review")
    assert isinstance(usage, BadCommand) and "/harness review <pull request URL>" in usage.message
