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
    <p>.kill.<agent>       plain NATS request/reply: stop the agent; answered once asked. A
                           kill its worker cannot be told (cut off) is kept by the
                           orchestrator and sent again until answered.

A worker can do exactly this: take runs, publish their events and heartbeats, and ask the
orchestrator to run harness tools for the agents it runs. It never sees Slack.

Every message is a dataclass in the one JSON form of ``harness/serialise.py`` (camelCase keys);
one that does not read raises ``serialise.DecodeError``, a ValueError.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from harness import serialise
from harness.runtime.spec import (
    AgentSpec,
    Approval,
    RunOutcome,
    SpareLimits,
    ToolReply,
    ToolUse,
)

EventKind = Literal["started", "placed", "message", "tool_use", "outcome"]
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
    def spares_bucket(self) -> str:
        """The key-value bucket whose key ``SPARES_KEY`` holds the spares workers keep."""
        return f"{self._stream_prefix}_SPARES"

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
        return serialise.dump_json(self)

    @classmethod
    def decode(cls, data: bytes) -> RunRequest:
        return serialise.load_json(cls, data)


@dataclass(frozen=True)
class Event:
    """Something a remote agent did; ``seq`` counts from 1 per agent run."""

    seq: int
    kind: EventKind
    worker: str
    data: Mapping[str, Any]

    def encode(self) -> bytes:
        return serialise.dump_json(self)

    @classmethod
    def decode(cls, data: bytes) -> Event:
        return serialise.load_json(cls, data)

    def msg_id(self, agent_id: str) -> str:
        """The JetStream de-duplication id: a re-published event is stored once."""
        return f"{agent_id}-{self.seq}"


# The payloads of ``tool_use`` and ``outcome`` events.


def tool_use_json(use: ToolUse) -> dict[str, Any]:
    return serialise.to_json(use)


def tool_use_from_json(data: Mapping[str, Any]) -> ToolUse:
    return serialise.from_json(ToolUse, data)


def outcome_json(outcome: RunOutcome) -> dict[str, Any]:
    return serialise.to_json(outcome)


def outcome_from_json(data: Mapping[str, Any]) -> RunOutcome:
    return serialise.from_json(RunOutcome, data)


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
        return serialise.dump_json(self)

    @classmethod
    def decode(cls, data: bytes) -> ToolRequest:
        return serialise.load_json(cls, data)


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
    return serialise.dump_json(reply)


def decode_reply(data: bytes) -> ToolReply:
    return serialise.load_json(ToolReply, data)


def encode_approval(approval: Approval) -> bytes:
    return serialise.dump_json(approval)


def decode_approval(data: bytes) -> Approval:
    return serialise.load_json(Approval, data)


def _dump(value: Mapping[str, Any]) -> bytes:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def _load(data: bytes) -> dict[str, Any]:
    raw = json.loads(data)
    if not isinstance(raw, dict):
        raise ValueError("expected a JSON object")
    return raw


SPARES_KEY = "templates"


def spares_json(
    templates: Sequence[tuple[AgentSpec, int]], limits: SpareLimits | None = None
) -> bytes:
    """The spares the orchestrator asks workers to keep: each template and its count, and
    the caps on what each worker's idle spares hold (config.yaml's ``spares.maxIdle`` and
    ``spares.maxMemoryMb``)."""
    limits = limits or SpareLimits()
    return json.dumps(
        {
            "spares": [{"spec": t.to_json(), "count": n} for t, n in templates],
            "maxIdle": limits.max_idle,
            "maxMemoryMb": limits.max_memory_mb,
        }
    ).encode()


def decode_spares(data: bytes) -> list[tuple[AgentSpec, int]]:
    """The templates ``spares_json`` wrote (or an older harness's list of them); [] for
    anything else (a damaged one)."""
    try:
        raw = json.loads(data)
        items = raw["spares"] if isinstance(raw, dict) else raw
        return [(AgentSpec.from_json(i["spec"]), int(i["count"])) for i in items]
    except (ValueError, TypeError, KeyError):
        return []


def decode_spare_limits(data: bytes) -> SpareLimits:
    """The caps ``spares_json`` wrote; a cap that is missing or not a count is no cap."""

    def cap(value: object) -> int | None:
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            return None
        return value

    try:
        raw = json.loads(data)
    except ValueError:
        return SpareLimits()
    if not isinstance(raw, dict):
        return SpareLimits()
    return SpareLimits(cap(raw.get("maxIdle")), cap(raw.get("maxMemoryMb")))
