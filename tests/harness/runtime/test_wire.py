"""The wire protocol with workers: every message survives the trip, and junk is refused."""

from __future__ import annotations

import pytest

from harness.config.roles import Role
from harness.runtime.spec import AgentSpec, Approval, RunOutcome, ToolReply, ToolUse
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
from harness.tasks.model import AgentResult


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


def test_events_outcomes_and_tool_uses_round_trip() -> None:
    outcome = RunOutcome(
        "completed", AgentResult("done", ("a.py",), (), ("why?",)), None, "bye", 0.25, 3, 1200
    )
    use = ToolUse("tu1", "Edit", {"file_path": "a.py"})
    event = Event(7, "outcome", "worker-a", outcome_json(outcome))

    assert Event.decode(event.encode()) == event
    assert outcome_from_json(Event.decode(event.encode()).data) == outcome
    assert tool_use_from_json(tool_use_json(use)) == use
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
