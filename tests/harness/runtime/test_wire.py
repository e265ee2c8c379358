"""The wire protocol with workers: every message survives the trip, and junk is refused."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.config.roles import Role
from harness.config.settings import SandboxSettings
from harness.permissions.rules import parse_rule
from harness.runtime.spec import (
    AgentSpec,
    Approval,
    RunOutcome,
    ToolDeclaration,
    ToolReply,
    ToolUse,
)
from harness.runtime.wire import (
    Event,
    RunRequest,
    Subjects,
    ToolRequest,
    decode_approval,
    decode_reply,
    encode_approval,
    encode_reply,
    outcome_from_json,
    outcome_json,
    tool_use_from_json,
    tool_use_json,
)
from harness.serialise import DecodeError
from harness.tasks.model import AgentResult
from harness.workspaces.manager import WorkReport, WorkspaceRequest


def test_subjects_and_streams_follow_the_prefix() -> None:
    s = Subjects("acme-harness")
    assert (s.run("a1"), s.events("a1"), s.alive("a1"), s.tools("a1"), s.kill("a1")) == (
        "acme-harness.runs.a1",
        "acme-harness.events.a1",
        "acme-harness.alive.a1",
        "acme-harness.tools.a1",
        "acme-harness.kill.a1",
    )
    assert (s.runs_stream, s.events_stream, s.all_events) == (
        "ACME_HARNESS_RUNS",
        "ACME_HARNESS_EVENTS",
        "acme-harness.events.>",
    )


def test_a_run_request_carries_the_whole_spec_and_its_task() -> None:
    role = Role("developer", "Developer", "dev", "p", "roles/developer.md", tools=("Bash",))
    spec = AgentSpec("a1", role, "fix ✓", "/w/fix", env={"X": "1"}, task_slug="fix")

    again = RunRequest.decode(RunRequest(spec, "fix").encode())

    assert again == RunRequest(spec, "fix")


def test_a_spec_travels_whole_with_camel_case_keys() -> None:
    role = Role(
        "developer",
        "Developer",
        "dev",
        "p",
        "roles/developer.md",
        cwd=Path("/w"),
        tools=("Bash",),
        allow=(parse_rule("Bash(pytest:*)"),),
        deny=(parse_rule("Bash(rm:*)"),),
    )
    spec = AgentSpec(
        "a1",
        role,
        "fix",
        "/w/fix",
        harness_tools=(ToolDeclaration("draft_agent", "Draft", {"type": "object"}),),
        workspace=WorkspaceRequest("web", None, "/repos/web", "main"),
    )

    raw = json.loads(RunRequest(spec, "fix").encode())

    assert raw["taskSlug"] == "fix"
    assert raw["spec"]["role"]["displayName"] == "Developer"
    assert raw["spec"]["role"]["allow"] == [
        {"tool": "Bash", "specifier": "pytest:*", "text": "Bash(pytest:*)"}
    ]
    assert raw["spec"]["harnessTools"] == [
        {"name": "draft_agent", "description": "Draft", "inputSchema": {"type": "object"}}
    ]
    assert raw["spec"]["workspace"] == {
        "repository": "web",
        "url": None,
        "path": "/repos/web",
        "baseBranch": "main",
        "commitWork": True,
    }
    assert RunRequest.decode(json.dumps(raw).encode()) == RunRequest(spec, "fix")


def test_a_spec_and_an_outcome_as_earlier_versions_sent_them_still_read() -> None:
    # Earlier versions sent the role, the workspace request and the work report snake_case.
    role = {
        "name": "developer",
        "display_name": "Developer",
        "category": "dev",
        "prompt": "p",
        "source": "r.md",
        "cwd": None,
        "tools": None,
        "permission_mode": "default",
        "allow": [{"tool": "Read", "specifier": None, "text": "Read"}],
        "deny": [],
    }
    spec = {
        "agentId": "a1",
        "role": role,
        "prompt": "fix",
        "cwd": "/w",
        "withholdEnv": ["SLACK_*"],  # no longer a field: agents get an allow-list
        "workspace": {
            "repository": "web",
            "url": None,
            "path": "/r",
            "base_branch": "main",
            "commit_work": False,
        },
    }
    outcome = {
        "status": "completed",
        "result": None,
        "durationMs": None,
        "work": {"branch": None, "head_commit": "abc", "diff_stat": "", "diff": ""},
    }

    request = RunRequest.decode(json.dumps({"spec": spec, "taskSlug": "fix"}).encode())

    assert request.spec.role.allow == (parse_rule("Read"),)
    assert request.spec.workspace == WorkspaceRequest("web", None, "/r", "main", False)
    assert outcome_from_json(outcome) == RunOutcome(
        "completed", duration_ms=0, work=WorkReport(None, "abc", "", "")
    )


def test_events_outcomes_and_tool_uses_round_trip() -> None:
    outcome = RunOutcome(
        "completed",
        AgentResult("done", ("a.py",), (), ("why?",)),
        None,
        "bye",
        0.25,
        3,
        1200,
        WorkReport("harness/fix", "abc123", " a.py | 1 +", "diff --git ..."),
    )
    use = ToolUse("tu1", "Edit", {"file_path": "a.py"})
    event = Event(7, "outcome", "worker-a", outcome_json(outcome))

    assert Event.decode(event.encode()) == event
    assert outcome_from_json(Event.decode(event.encode()).data) == outcome
    assert tool_use_from_json(tool_use_json(use)) == use
    assert tool_use_json(use) == {
        "toolUseId": "tu1",
        "name": "Edit",
        "input": {"file_path": "a.py"},
    }
    assert outcome_json(outcome)["work"]["headCommit"] == "abc123"
    assert event.msg_id("a1") == "a1-7"


def test_tool_requests_replies_and_approvals_round_trip() -> None:
    request = ToolRequest("call", "await_agent", {"agentId": "a2"})
    reply = ToolReply({"error": "NOT_FOUND", "message": "no such agent"}, is_error=True)

    assert ToolRequest.decode(request.encode()) == request
    assert decode_reply(encode_reply(reply)) == reply
    assert decode_approval(encode_approval(Approval(False, "denied by U1"))) == Approval(
        False, "denied by U1"
    )


@pytest.mark.parametrize(
    "data",
    [b"[]", b'{"seq": 1, "kind": "dance", "worker": "w"}', b"not json", b'{"kind": "x"}'],
)
def test_junk_on_the_wire_is_refused_with_a_clear_error(data: bytes) -> None:
    with pytest.raises((ValueError, KeyError)):
        Event.decode(data)
    with pytest.raises((ValueError, KeyError)):
        ToolRequest.decode(data)


def test_a_wrong_field_on_the_wire_is_named_by_its_path() -> None:
    with pytest.raises(DecodeError, match=r"seq: expected an integer, found a string \('7'\)"):
        Event.decode(b'{"seq": "7", "kind": "message", "worker": "w", "data": {}}')
    with pytest.raises(DecodeError, match=r"result\.summary: missing"):
        outcome_from_json({"status": "completed", "result": {"changes": []}})


def test_a_roles_env_and_the_sandboxs_pass_env_and_hide_travel_with_the_spec() -> None:
    role = Role("developer", "Developer", "worker", "p", "r.md", env={"NODE_OPTIONS": "-x"})
    sandbox = SandboxSettings(pass_env=("AWS_REG*",), hide=("/srv/keys",))
    spec = AgentSpec(agent_id="a1", role=role, prompt="fix", cwd="/w", sandbox=sandbox)

    request = RunRequest.decode(RunRequest(spec, "fix").encode())

    assert request.spec == spec
    assert request.spec.role.env == {"NODE_OPTIONS": "-x"}
    assert request.spec.sandbox.pass_env == ("AWS_REG*",)
