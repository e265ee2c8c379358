"""A routine's prompt takes the event's fields: ``{pull_request.title}``, ``{payload.version}``;
a field the event lacks is an error naming it, not a crash; nothing else is evaluated."""

from __future__ import annotations

import pytest

from harness.errors import HarnessError
from harness.routines.model import RoutineError
from harness.routines.template import prompt_fields, render_prompt

PULL = {"pull_request": {"title": "Fix login", "html_url": "https://github.com/a/b/pull/7"}}


def test_fields_of_the_github_payload_fill_the_prompt() -> None:
    text = render_prompt("review-prs", "Review {pull_request.html_url}: {pull_request.title}", PULL)

    assert text == "Review https://github.com/a/b/pull/7: Fix login"


def test_the_http_body_is_the_payload_and_non_strings_read_as_json() -> None:
    body = {"payload": {"version": "1.4.2", "hosts": ["a", "b"], "labels": [{"name": "x"}]}}

    text = render_prompt(
        "deploy", "{payload.version} on {payload.hosts} {payload.labels.0.name}", body
    )

    assert text == '1.4.2 on ["a", "b"] x'


def test_a_missing_field_is_a_routine_error_naming_it() -> None:
    with pytest.raises(RoutineError) as caught:
        render_prompt("deploy", "The deploy of {payload.version} finished", {"payload": {}})

    assert isinstance(caught.value, HarnessError)
    assert caught.value.field == "payload.version"
    assert caught.value.routine == "deploy"
    assert "{payload.version}" in caught.value.message


def test_only_dotted_names_are_replaced_and_doubled_braces_are_braces() -> None:
    text = render_prompt("r", "{{literal}} {pull_request.title!r} {0} {pull_request.title}", PULL)

    assert text == "{literal} {pull_request.title!r} {0} Fix login"
    assert prompt_fields("a {x.y} {{z}} {w}") == ["x.y", "w"]
