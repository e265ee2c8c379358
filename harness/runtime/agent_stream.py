"""What an agent's CLI says, folded into its outcome: the message stream's retry notices,
result and errors (``RunTracker``), and the agent's own ``harness`` MCP server that forwards
each tool call to the gateway in the agent's name. Used by the runtime's SDK side
(``sdk_session.py``)."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from typing import Any, Protocol

import mcp.types as mt
from claude_agent_sdk import (
    AssistantMessage,
    Message,
    ResultMessage,
    SystemMessage,
    TextBlock,
    ToolUseBlock,
)
from claude_agent_sdk._errors import ResultError
from claude_agent_sdk.types import McpSdkServerConfig
from mcp.server import Server

from harness.runtime.binding import CountedSpend
from harness.runtime.spec import (
    MODEL_API_RETRIES_ENV,
    SERVER_NAME,
    AgentControl,
    AgentSpec,
    RunOutcome,
    ToolGateway,
)
from harness.tasks.journal import api_retry_cause, api_retry_in
from harness.tasks.model import AgentResult


class Caller(Protocol):
    """Who an agent's tool calls are made as, and through which gateway (a spare learns
    both when it is given its dispatch)."""

    agent_id: str
    tools: ToolGateway


def message_to_json(message: Message) -> dict[str, Any]:
    """An SDK message as a JSON-ready dict for the journal."""
    body = dataclasses.asdict(message) if dataclasses.is_dataclass(message) else {}
    return {"type": type(message).__name__, **body}


def retry_limit(env: Mapping[str, str]) -> int | None:
    """The model API retries an agent may make (modelApiRetries, given to the CLI too)."""
    value = env.get(MODEL_API_RETRIES_ENV, "").strip()
    return int(value) if value.isdigit() else None


class RunTracker:
    """Folds the message stream into an outcome. Each retry notice of the CLI (its model API
    call failed) shows at once as the agent's activity; one past ``retry_limit`` means the CLI
    did not honour the limit, and the run is to be stopped (``over_retry_limit``). The cost
    is the CLI's, or what the sandbox's proxy counted (``spend``) where that is more."""

    def __init__(
        self,
        control: AgentControl,
        *,
        retry_limit: int | None = None,
        model_api: str | None = None,  # ANTHROPIC_BASE_URL as the CLI sees it, if set
        spend: CountedSpend | None = None,
    ) -> None:
        self.control = control
        self.spend = spend
        self.retry_limit = retry_limit
        self.model_api = model_api
        self.over_retry_limit = False
        self.last_text: str | None = None
        self.result_message: ResultMessage | None = None
        self.error: str | None = None
        # The CLI's last retry notice of a failing model API call (the orchestrator shows
        # each as progress); None again once the model answers.
        self.last_retry: dict[str, Any] | None = None
        self.api_error: str | None = None  # the CLI's "API Error: ..." once it gave up
        self.session_id: str | None = None

    def observe(self, message: Message) -> None:
        if isinstance(message, AssistantMessage):
            texts = [b.text for b in message.content if isinstance(b, TextBlock) and b.text]
            if message.error is None:  # the model answered
                self.last_retry = None
            else:  # the CLI's own "API Error: ..." when it gives up on the model API
                self.api_error = "\n".join(texts) or message.error
            if texts:
                self.last_text = "\n".join(texts)
            tools = [b.name for b in message.content if isinstance(b, ToolUseBlock)]
            if tools:
                self.control.activity = f"using {tools[-1]}"
            elif texts:
                self.control.activity = "writing"
        elif isinstance(message, ResultMessage):
            self.result_message = message
            self.session_id = message.session_id or self.session_id
        elif isinstance(message, SystemMessage) and message.subtype == "init":
            self.session_id = str(message.data.get("session_id") or "") or None
        elif isinstance(message, SystemMessage) and message.subtype == "api_retry":
            self.last_retry = message.data
            self.control.activity = api_retry_in(message_to_json(message)) or "retrying"
            attempt = message.data.get("attempt")
            if self.retry_limit is not None and isinstance(attempt, int):
                self.over_retry_limit = self.over_retry_limit or attempt > self.retry_limit

    def _cost(self, reported: float | None) -> float | None:
        """What the CLI reported, or what the proxy counted if more: calls made around the
        CLI (or that it did not price) are paid all the same."""
        if self.spend is None or self.spend.calls == 0:
            return reported
        return max(reported or 0.0, self.spend.cost_usd)

    def _unreachable(self, retry: dict[str, Any], error: str) -> str:
        retries = retry.get("attempt", "?")
        said = f"The CLI said: {error}"
        if self.over_retry_limit and self.retry_limit is not None:
            retries = self.retry_limit
            tried = f"{retry.get('attempt')}/{retry.get('max_retries')}"
            said = f"The CLI went on retrying ({tried}) and was stopped."
        cause = api_retry_cause(retry)
        if self.model_api:
            cause += f" {'to' if cause == 'no connection' else 'from'} {self.model_api}"
        return (
            f"the model API was unreachable after {retries} "
            f"{'retry' if retries == 1 else 'retries'} ({cause}; the limit is modelApiRetries "
            f"in config.yaml): check ANTHROPIC_BASE_URL, the network and the API's status. {said}"
        )

    def outcome(self, duration_ms: int) -> RunOutcome:
        rm = self.result_message
        base = RunOutcome(
            status="completed",
            result=AgentResult.from_json(rm.structured_output) if rm is not None else None,
            last_text=self.last_text,
            cost_usd=self._cost(rm.total_cost_usd if rm is not None else None),
            turns=rm.num_turns if rm is not None else None,
            duration_ms=rm.duration_ms if rm is not None and rm.duration_ms else duration_ms,
        )
        if self.control.kill_reason is not None:
            return dataclasses.replace(base, status="killed", error=self.control.kill_reason)
        error = self.error
        if error is None and rm is not None and rm.is_error:
            error = _describe_result(rm.subtype, rm.errors, rm.result)
        if error is None and base.result is None:
            error = (
                "the agent ended without a structured result (it never called "
                "StructuredOutput); its last text is kept"
                if rm is not None
                else "the agent ended without a result message"
            )
        if error is not None and self.last_retry is not None and base.result is None:
            error = self._unreachable(self.last_retry, self.api_error or error)
        if error is not None:
            return dataclasses.replace(base, status="failed", error=error)
        return base


def _describe_result(subtype: str | None, errors: list[str] | None, text: str | None) -> str:
    reasons = {
        "error_max_turns": "it reached the role's maxTurns limit",
        "error_max_budget_usd": "it reached the role's maxBudgetUsd limit",
        "error_max_structured_output_retries": (
            "its structured result did not match the schema after 5 tries"
        ),
        "error_during_execution": "the run failed during execution",
    }
    reason = reasons.get(subtype or "", f"the run ended with {subtype}")
    details = "; ".join(e for e in (errors or []) if e) or (text or "")
    return f"{reason}: {details}" if details else reason


def describe_result_error(exc: ResultError) -> str:
    return _describe_result(exc.subtype, exc.errors, exc.result)


def build_server(spec: AgentSpec, caller: Caller) -> McpSdkServerConfig:
    """The agent's own in-process ``harness`` MCP server: it offers the spec's tools and
    forwards each call to the gateway in this agent's name, so the caller is never guessed."""
    offered = [
        mt.Tool(name=t.name, description=t.description, input_schema=dict(t.input_schema))
        for t in spec.harness_tools
    ]

    async def on_list_tools(
        _ctx: Any, _params: mt.PaginatedRequestParams | None
    ) -> mt.ListToolsResult:
        return mt.ListToolsResult(tools=offered)

    async def on_call_tool(_ctx: Any, params: mt.CallToolRequestParams) -> mt.CallToolResult:
        reply = await caller.tools.call(caller.agent_id, params.name, params.arguments or {})
        text = json.dumps(reply.payload, ensure_ascii=False)
        return mt.CallToolResult(
            content=[mt.TextContent(type="text", text=text)], is_error=reply.is_error
        )

    server: Server[Any] = Server(
        SERVER_NAME, version="1.0.0", on_list_tools=on_list_tools, on_call_tool=on_call_tool
    )
    return McpSdkServerConfig(type="sdk", name=SERVER_NAME, instance=server)
