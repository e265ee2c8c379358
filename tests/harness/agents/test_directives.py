"""`plan first:` and `model:<name>` at the start of a request, and the role an agent of such
a request runs as: the model checked against the role's list, a planner read-only."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.agents.directives import (
    READING_TOOLS,
    Directives,
    allowed_models,
    for_request,
    parse_directives,
)
from harness.config.roles import Role, parse_role
from harness.errors import HarnessError, RoleError
from harness.sandbox.model_calls import RefusedCall, check_request, model_policy

DEVELOPER = """---
name: developer
category: worker
model: sonnet
models: [opus, haiku]
tools: [Read, Write, Edit, Bash, Glob, Grep]
permissionMode: acceptEdits
allow: ["Bash(pytest:*)"]
---
You are a developer.
"""


def developer(text: str = DEVELOPER) -> Role:
    return parse_role(text, source="roles/developer.md", base_dir=Path("/project"))


@pytest.mark.parametrize(
    ("text", "directives", "rest"),
    [
        ("plan first: add a page", Directives(plan_first=True), "add a page"),
        ("model:opus fix the login", Directives(model="opus"), "fix the login"),
        ("model:opus plan first: x", Directives(plan_first=True, model="opus"), "x"),
        ("Plan First:model: haiku, x", Directives(plan_first=True, model="haiku"), "x"),
        ("  model:claude-opus-5-5 x", Directives(model="claude-opus-5-5"), "x"),
        ("model:sonnet[1m]", Directives(model="sonnet[1m]"), ""),
        ("plan first:plan first: x", Directives(plan_first=True), "plan first: x"),
        ("model:opus model:haiku x", Directives(model="opus"), "model:haiku x"),
    ],
)
def test_directives_at_the_start_are_taken_off_the_request(
    text: str, directives: Directives, rest: str
) -> None:
    assert parse_directives(text) == (directives, rest)


@pytest.mark.parametrize(
    "text",
    [
        "plan: a settings page",  # the analyst's routing word, not a plan first
        "modelling: the data",
        "fix it with model:opus",  # only at the start
        "model:opus:x",
        "model: ",
    ],
)
def test_text_without_a_directive_at_its_start_is_left_as_it_is(text: str) -> None:
    assert parse_directives(text) == (Directives(), text)


def test_a_role_lists_the_models_a_request_may_pick_its_own_first() -> None:
    role = developer()
    assert role.models == ("opus", "haiku")
    assert allowed_models(role) == ("sonnet", "opus", "haiku")


def test_a_picked_model_the_role_allows_is_the_agents_model() -> None:
    role = for_request(developer(), model="OPUS")
    assert role.model == "opus"


def test_a_model_the_role_does_not_allow_is_refused_with_the_list_it_does() -> None:
    with pytest.raises(HarnessError) as refused:
        for_request(developer(), model="fable")
    assert refused.value.message == (
        "the developer role does not allow the model `fable`; it allows `sonnet`, `opus`, `haiku`"
    )
    assert "model:haiku" in refused.value.fix


def test_a_role_without_models_lets_no_request_pick_one() -> None:
    plain = developer(DEVELOPER.replace("model: sonnet\nmodels: [opus, haiku]\n", ""))
    with pytest.raises(HarnessError, match="does not let a request pick its model"):
        for_request(plain, model="opus")


def test_a_planner_gets_reading_tools_plan_mode_no_allow_rules_and_no_full_access() -> None:
    planner = for_request(developer(), plan=True)
    assert planner.tools == READING_TOOLS
    assert planner.permission_mode == "plan"
    assert planner.allow == ()
    assert planner.category == "planner"
    assert not planner.writes


def test_the_sandbox_forwards_the_picked_model_and_refuses_the_roles_default() -> None:
    policy = model_policy(for_request(developer(), model="opus").model, {})

    def body(model: str) -> bytes:
        return f'{{"model": "{model}", "max_tokens": 1000, "messages": []}}'.encode()

    assert check_request(body("claude-opus-5-5"), policy, billed=True).model == "claude-opus-5-5"
    with pytest.raises(RefusedCall):
        check_request(body("claude-sonnet-5-5"), policy, billed=True)


def test_a_role_file_with_plan_first_and_a_bad_model_name() -> None:
    role = developer(DEVELOPER.replace("category: worker\n", "category: worker\nplanFirst: true\n"))
    assert role.plan_first
    with pytest.raises(RoleError, match="models"):
        developer(DEVELOPER.replace("models: [opus, haiku]", "models: [opus, 'a b']"))
    with pytest.raises(RoleError, match="listed twice"):
        developer(DEVELOPER.replace("models: [opus, haiku]", "models: [opus, opus]"))
