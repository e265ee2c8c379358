"""The approval policy, in its order: the role's deny rules, its allow rules and the task's
granted ones, its permissionMode, the OS sandbox, then a human, whose answer decides."""

from __future__ import annotations

import pytest

from harness.agents.approval_policy import Ruling, no_human, rule_answer, rule_approval
from harness.agents.questions import Answer
from harness.config.roles import PermissionMode, Role
from harness.permissions.rules import parse_rule

CWD = "/w/t-1"


def role(
    mode: PermissionMode = "default",
    allow: tuple[str, ...] = (),
    deny: tuple[str, ...] = (),
    tools: tuple[str, ...] | None = None,
) -> Role:
    return Role(
        "developer", "Developer", "worker", "You write code.", "roles/developer.md",
        tools=tools, permission_mode=mode,
        allow=tuple(parse_rule(r) for r in allow), deny=tuple(parse_rule(r) for r in deny),
    )  # fmt: skip


def bash(command: str, of: Role, *, granted: tuple[str, ...] = (), sandbox: bool = False) -> Ruling:
    rules = tuple(parse_rule(r) for r in granted)
    return rule_approval(
        "Bash", {"command": command}, cwd=CWD, role=of, granted=rules, sandbox=sandbox
    )


def test_a_deny_rule_refuses_whatever_allows_it() -> None:
    developer = role("bypassPermissions", allow=("Bash",), deny=("Bash(rm:*)",))

    assert bash("rm -rf build", developer, granted=("Bash(rm -rf build)",), sandbox=True) == (
        Ruling("deny", "rule Bash(rm:*)", "denied by the developer role's rule Bash(rm:*)")
    )


def test_the_roles_allow_rules_and_the_tasks_granted_ones_let_a_call_run() -> None:
    developer = role(allow=("Bash(pytest:*)",))

    assert bash("pytest -q", developer) == Ruling("allow", "rule Bash(pytest:*)")
    assert bash("git push -h", developer, granted=("Bash(git push -h)",)) == Ruling(
        "allow", "rule Bash(git push -h)"
    )


def test_the_permission_mode_decides_what_no_rule_did() -> None:
    assert bash("make deploy", role("bypassPermissions")) == Ruling(
        "allow", "permissionMode bypassPermissions"
    )
    assert bash("make deploy", role("dontAsk")) == Ruling(
        "deny",
        "permissionMode dontAsk",
        "denied by the developer role's permissionMode dontAsk",
    )
    edits = role("acceptEdits")
    inside = rule_approval("Write", {"file_path": f"{CWD}/a.py"}, cwd=CWD, role=edits)
    outside = rule_approval("Write", {"file_path": "/etc/profile"}, cwd=CWD, role=edits)
    assert inside == Ruling("allow", "permissionMode acceptEdits")
    assert outside.decision == "ask"


def test_a_rule_decides_before_the_mode() -> None:
    assert bash("pytest -q", role("plan", allow=("Bash(pytest:*)",))).decision == "allow"
    assert bash("pytest -q", role("bypassPermissions", deny=("Bash",))).decision == "deny"


def test_in_the_sandbox_what_stays_inside_runs_and_what_leaves_is_asked() -> None:
    developer = role()

    assert bash("make test", developer, sandbox=True) == Ruling("allow", "sandbox")
    assert bash("git push origin main", developer, sandbox=True).decision == "ask"
    assert bash("make test", developer, sandbox=False).decision == "ask"
    # A role that cannot write runs in no sandbox: the sandbox vouches for nothing it does.
    assert bash("make test", role(tools=("Read", "Grep")), sandbox=True).decision == "ask"


def test_a_mode_that_refuses_is_not_overridden_by_the_sandbox() -> None:
    assert bash("make test", role("dontAsk"), sandbox=True).decision == "deny"


def test_what_nothing_decided_is_asked_saying_why() -> None:
    assert bash("git push -h", role(allow=("Bash(git status)",))) == Ruling(
        "ask", message="no allow rule covers `git push -h`"
    )


@pytest.mark.parametrize(
    ("answer", "ruling"),
    [
        (None, Ruling("deny", "timeout", "denied: nobody approved it in time")),
        (Answer("", "U42", "once"), Ruling("allow", "U42 (Allow once)")),
        (
            Answer("", "U42", "task"),
            Ruling("allow", "U42 (Allow for this task)", remember=True),
        ),
        (
            Answer("no pushes from agents", "U42", "deny"),
            Ruling("deny", "U42 (Deny)", "denied by U42: no pushes from agents"),
        ),
        (Answer("", "U42", "deny"), Ruling("deny", "U42 (Deny)", "denied by U42: denied")),
        # An answer without a verdict is no approval.
        (Answer("hmm", "U42"), Ruling("deny", "U42 (Deny)", "denied by U42: hmm")),
    ],
)
def test_a_humans_answer_decides_and_only_allow_for_this_task_is_remembered(
    answer: Answer | None, ruling: Ruling
) -> None:
    assert rule_answer(answer) == ruling


def test_with_no_human_to_ask_it_is_refused() -> None:
    assert no_human("nobody reaches task t-1") == Ruling(
        "deny", "no human", "denied: no human could approve it (nobody reaches task t-1)"
    )
    assert not no_human("x").allowed and Ruling("allow").allowed


def test_a_path_leaving_the_folder_by_dot_dot_is_outside_it() -> None:
    # The caller resolves links first: the policy judges the path it is handed.
    edits = role("acceptEdits")
    linked = rule_approval("Edit", {"file_path": f"{CWD}/../t-2/a.py"}, cwd=CWD, role=edits)
    assert linked.decision == "ask"
