"""Whose agent a CLI is: the agent its tool calls are made as, the gateway they go through,
and what its sandbox's proxy counted and holds. Set when the CLI starts, or, for a spare,
when it is given its dispatch. Free of the Claude SDK, which imports after the CLI starts."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from harness.runtime.spec import Approval, ToolGateway, ToolReply, ToolUse, ToolUseSink
from harness.sandbox.model_calls import Usage


class CountedSpend:
    """The model calls of one agent's sandbox as its egress proxy counted them, whoever in
    the sandbox made them (``add`` is the proxy's ``on_usage``)."""

    def __init__(self) -> None:
        self.cost_usd = 0.0
        self.usage = Usage()
        self.calls = 0

    def add(self, cost_usd: float, usage: Usage) -> None:
        self.cost_usd += cost_usd
        self.usage += usage
        self.calls += 1


@dataclass
class CallHold:
    """Whether the sandbox's proxy is to answer a CLI's model calls itself, unsent (during
    its priming turn), and how many it answered so. The proxy calls it once per call."""

    on: bool = False
    calls: int = 0

    def __call__(self) -> bool:
        if self.on:
            self.calls += 1
        return self.on


class _NotYet:
    """A spare's gateway before it is given its dispatch: it makes no call before then."""

    async def call(self, agent_id: str, tool: str, args: Mapping[str, Any]) -> ToolReply:
        error = {"code": "INVALID_AGENT_STATE", "message": "no task yet", "suggestion": ""}
        return ToolReply({"error": error}, is_error=True)

    async def approve(self, agent_id: str, tool: str, args: Mapping[str, Any]) -> Approval:
        return Approval(False, "the agent has no task yet")


async def _no_tool_use(_use: ToolUse) -> None:
    return None


@dataclass
class Binding:
    """Whose agent the CLI is: its calls are made as ``agent_id`` through ``tools``."""

    agent_id: str
    tools: ToolGateway = field(default_factory=_NotYet)
    on_tool_use: ToolUseSink = _no_tool_use
    # Its model calls as its sandbox's proxy counted them.
    spend: CountedSpend = field(default_factory=CountedSpend)
    hold: CallHold = field(default_factory=CallHold)  # on for a spare's priming turn
