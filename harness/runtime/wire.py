"""The wire protocol between the harness (the orchestrator's side) and ``harness worker``
processes on other machines, over NATS with JetStream. Pure: names and JSON, no I/O.

Subjects, under a prefix (``harness`` by default)::

    <p>.runs.<agent>       JetStream work queue (stream <P>_RUNS): one RunRequest per agent
                           run; a worker with a free slot takes it, and acks it once the
                           agent has started, so a run is never started twice. One subject
                           per agent, so a run nobody took yet can be withdrawn.
    <p>.events.<agent>     JetStream (stream <P>_EVENTS): what the agent did, in order, each
                           with a sequence number: started, message, tool_use, outcome. They
                           wait in the stream while nobody listens (a bot restarting).
    <p>.alive.<agent>      plain NATS: the worker's heartbeat for a running agent; silence
                           for too long means the worker is lost.
    <p>.tools.<agent>      plain NATS, to the orchestrator: the agent's harness tool calls and
                           approval requests (ToolRequest, with a call id and a reply
                           subject). The orchestrator answers on the reply subject at once
                           with ``working``, again every few seconds while the call runs
                           (``await_agent`` may take hours), then ``done`` with the reply. A
                           worker that hears nothing sends the call again with the same id
                           (the orchestrator restarted): a call still running, or answered
                           a moment ago, is not run twice by the same orchestrator.
    <p>.kill.<agent>       plain NATS request/reply: stop the agent; answered once asked.

A worker can do exactly this: take runs, publish their events and heartbeats, and ask the
orchestrator to run harness tools for the agents it runs. It never sees Slack.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from harness.runtime.spec import AgentSpec, Approval, RunOutcome, ToolReply, ToolUse
from harness.tasks.model import AgentResult
from harness.workspaces.manager import WorkReport

EventKind = Literal["started", "message", "tool_use", "outcome"]
DEFAULT_PREFIX = "harness"


@dataclass(frozen=True)
class Subjects:
    prefix: str = DEFAULT_PREFIX

    @property
    def all_runs(self) -> str:
        return f"{self.prefix}.runs.>"

    def run(self, agent_id: str) -> str:
        return f"{self.prefix}.runs.{agent_id}"

    @property
    def runs_stream(self) -> str:
        return f"{self._stream_prefix}_RUNS"

    @property
    def events_stream(self) -> str:
        return f"{self._stream_prefix}_EVENTS"

    @property
    def all_events(self) -> str:
        return f"{self.prefix}.events.>"

    def events(self, agent_id: str) -> str:
        return f"{self.prefix}.events.{agent_id}"

    def alive(self, agent_id: str) -> str:
        return f"{self.prefix}.alive.{agent_id}"

    def tools(self, agent_id: str) -> str:
        return f"{self.prefix}.tools.{agent_id}"

    def kill(self, agent_id: str) -> str:
        return f"{self.prefix}.kill.{agent_id}"

    @property
    def _stream_prefix(self) -> str:
        return self.prefix.upper().replace(".", "_").replace("-", "_")


@dataclass(frozen=True)
class RunRequest:
    """One agent to run: its spec, and the task folder name its scratch workspace takes."""

    spec: AgentSpec
    task_slug: str

    def encode(self) -> bytes:
        return _dump({"spec": self.spec.to_json(), "taskSlug": self.task_slug})

    @classmethod
    def decode(cls, data: bytes) -> RunRequest:
        raw = _load(data)
        return cls(AgentSpec.from_json(raw["spec"]), str(raw["taskSlug"]))


@dataclass(frozen=True)
class Event:
    """Something a remote agent did; ``seq`` counts from 1 per agent run."""

    seq: int
    kind: EventKind
    worker: str
    data: Mapping[str, Any]

    def encode(self) -> bytes:
        return _dump({"seq": self.seq, "kind": self.kind, "worker": self.worker, "data": self.data})

    @classmethod
    def decode(cls, data: bytes) -> Event:
        raw = _load(data)
        kind = raw["kind"]
        if kind not in ("started", "message", "tool_use", "outcome"):
            raise ValueError(f"unknown event kind {kind!r}")
        return cls(int(raw["seq"]), kind, str(raw["worker"]), dict(raw.get("data") or {}))

    def msg_id(self, agent_id: str) -> str:
        """The JetStream de-duplication id: a re-published event is stored once."""
        return f"{agent_id}-{self.seq}"


def tool_use_json(use: ToolUse) -> dict[str, Any]:
    return {"toolUseId": use.tool_use_id, "name": use.name, "input": dict(use.input)}


def tool_use_from_json(data: Mapping[str, Any]) -> ToolUse:
    return ToolUse(str(data["toolUseId"]), str(data["name"]), dict(data["input"]))


def outcome_json(outcome: RunOutcome) -> dict[str, Any]:
    result = outcome.result
    return {
        "status": outcome.status,
        "result": None
        if result is None
        else {
            "summary": result.summary,
            "changes": list(result.changes),
            "issues": list(result.issues),
            "questions": list(result.questions),
        },
        "error": outcome.error,
        "lastText": outcome.last_text,
        "costUsd": outcome.cost_usd,
        "turns": outcome.turns,
        "durationMs": outcome.duration_ms,
        "work": outcome.work.to_json() if outcome.work else None,
    }


def outcome_from_json(data: Mapping[str, Any]) -> RunOutcome:
    result = data.get("result")
    status = data["status"]
    if status not in ("completed", "failed", "killed", "interrupted"):
        raise ValueError(f"unknown outcome status {status!r}")
    return RunOutcome(
        status=status,
        result=None
        if not result
        else AgentResult(
            summary=str(result["summary"]),
            changes=tuple(result.get("changes", ())),
            issues=tuple(result.get("issues", ())),
            questions=tuple(result.get("questions", ())),
        ),
        error=data.get("error"),
        last_text=data.get("lastText"),
        cost_usd=data.get("costUsd"),
        turns=data.get("turns"),
        duration_ms=int(data.get("durationMs") or 0),
        work=WorkReport.from_json(data["work"]) if data.get("work") else None,
    )


# --- tool calls -------------------------------------------------------------------------


@dataclass(frozen=True)
class ToolRequest:
    """A harness tool call (``call``) or a built-in tool's approval request (``approve``);
    ``call_id`` is the same each time the worker sends it again."""

    kind: Literal["call", "approve"]
    tool: str
    args: Mapping[str, Any]
    call_id: str = ""

    def encode(self) -> bytes:
        return _dump(
            {"kind": self.kind, "tool": self.tool, "args": dict(self.args), "callId": self.call_id}
        )

    @classmethod
    def decode(cls, data: bytes) -> ToolRequest:
        raw = _load(data)
        kind = raw["kind"]
        if kind not in ("call", "approve"):
            raise ValueError(f"unknown tool request kind {kind!r}")
        return cls(kind, str(raw["tool"]), dict(raw.get("args") or {}), str(raw.get("callId", "")))


WORKING = b'{"kind":"working"}'


def encode_done(answer: bytes) -> bytes:
    """The final answer to a tool request: a reply or an approval, encoded."""
    return b'{"kind":"done","answer":' + answer + b"}"


def decode_answer(data: bytes) -> bytes | None:
    """The encoded answer of a ``done`` message; None for ``working``."""
    raw = _load(data)
    if raw.get("kind") == "working":
        return None
    if raw.get("kind") != "done":
        raise ValueError(f"unknown tool answer kind {raw.get('kind')!r}")
    return _dump(raw["answer"])


def encode_reply(reply: ToolReply) -> bytes:
    return _dump({"payload": reply.payload, "isError": reply.is_error})


def decode_reply(data: bytes) -> ToolReply:
    raw = _load(data)
    return ToolReply(dict(raw["payload"]), bool(raw.get("isError")))


def encode_approval(approval: Approval) -> bytes:
    return _dump({"allowed": approval.allowed, "message": approval.message})


def decode_approval(data: bytes) -> Approval:
    raw = _load(data)
    return Approval(bool(raw["allowed"]), str(raw.get("message") or ""))


def _dump(value: Mapping[str, Any]) -> bytes:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def _load(data: bytes) -> dict[str, Any]:
    raw = json.loads(data)
    if not isinstance(raw, dict):
        raise ValueError("expected a JSON object")
    return raw
