"""The ``harness`` MCP server: agents draft, await, kill and inspect agents (seeds 000-002).

One in-process server per access profile is built at start-up and handed to each dispatch by
its role's category. Servers are shared, so a call names its caller through the tool-use id
the CLI puts in the request's ``_meta``; each agent's PreToolUse hook saw that id first.
Every call is validated, permission-checked and appended to the task's audit log.
"""

from __future__ import annotations

import json
import logging
import time
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any

import mcp.types as mt
from claude_agent_sdk.types import McpSdkServerConfig
from mcp.server import Server

from harness.access import ALL_TOOLS, SERVER_NAME, qualified, tools_for_category
from harness.errors import AgentNotFoundError, InvalidSlugError, TaskNotFoundError, ToolError
from harness.mcp_tools import TOOL_SPECS, Caller, ToolHandlers
from harness.metadata import MetadataCollector
from harness.orchestrator import Orchestrator, utc_now
from harness.roles import Role
from harness.runtime import ToolUse
from harness.validation import json_schema, validate

logger = logging.getLogger(__name__)

AUDIT_LOG = "audit.jsonl"
_TOOL_USE_META = "claudecode/toolUseId"
_MAX_REMEMBERED_CALLS = 4096
_AUDIT_VALUE_LIMIT = 2000


class HarnessTools:
    """The ToolProvider the orchestrator uses; also callable directly (``call``)."""

    def __init__(
        self, orchestrator: Orchestrator, *, metadata: MetadataCollector | None = None
    ) -> None:
        self.orchestrator = orchestrator
        self.handlers = ToolHandlers(orchestrator, metadata or orchestrator.metadata)
        self._callers: OrderedDict[str, str] = OrderedDict()
        self._servers: dict[tuple[str, ...], McpSdkServerConfig] = {}
        for role in orchestrator.roles.values():
            profile = self.profile(role)
            if profile and profile not in self._servers:
                self._servers[profile] = self._build_server(profile)
        orchestrator.tools = self

    def profile(self, role: Role) -> tuple[str, ...]:
        return tools_for_category(role.category, self.orchestrator.config.mcp)

    # -- ToolProvider ----------------------------------------------------------------------

    def server_for(self, role: Role) -> tuple[McpSdkServerConfig | None, tuple[str, ...]]:
        profile = self.profile(role)
        if not profile:
            return None, ()
        server = self._servers.get(profile)
        if server is None:  # a role added after start-up
            server = self._servers[profile] = self._build_server(profile)
        return server, tuple(qualified(t) for t in profile)

    def note_tool_use(self, agent_id: str, use: ToolUse) -> None:
        if use.name.startswith(f"mcp__{SERVER_NAME}__") and use.tool_use_id:
            self._callers[use.tool_use_id] = agent_id
            while len(self._callers) > _MAX_REMEMBERED_CALLS:
                self._callers.popitem(last=False)

    def caller(self, agent_id: str) -> Caller | None:
        entry = self.orchestrator.pool.get(agent_id)
        if entry is None:
            return None
        role = self.orchestrator.roles[entry.role]
        return Caller(entry.agent_id, role.name, role.category, entry.task_slug, entry.depth)

    # -- calls -----------------------------------------------------------------------------

    async def call(
        self,
        tool: str,
        args: Mapping[str, Any],
        caller: Caller | None,
        *,
        offered: tuple[str, ...] = ALL_TOOLS,
    ) -> tuple[dict[str, Any], bool]:
        """Run one tool call: (JSON payload, is_error). Never raises."""
        started = time.monotonic()
        try:
            payload = await self._dispatch(tool, args, caller, offered)
            outcome, is_error = "ok", False
        except ToolError as exc:
            payload, outcome, is_error = exc.to_json(), exc.code, True
        except Exception as exc:  # the tool boundary: one bad call must not take the harness down
            logger.exception("harness tool %s failed", tool)
            error = ToolError(
                "INTERNAL_ERROR",
                f"{tool} failed inside the harness: {exc}",
                "retry once; if it fails again, report it to the humans in your result",
            )
            payload, outcome, is_error = error.to_json(), error.code, True
        self._audit(tool, args, caller, outcome, started)
        return payload, is_error

    async def _dispatch(
        self, tool: str, args: Mapping[str, Any], caller: Caller | None, offered: tuple[str, ...]
    ) -> dict[str, Any]:
        spec = TOOL_SPECS.get(tool)
        if spec is None:
            raise ToolError(
                "TOOL_NOT_FOUND",
                f"no harness tool {tool!r}",
                f"the harness tools are: {', '.join(ALL_TOOLS)}",
            )
        allowed = offered if caller is None else self._allowed(caller)
        if tool not in allowed or tool not in offered:
            who = f"role {caller.role!r} (category {caller.category!r})" if caller else "caller"
            raise ToolError(
                "PERMISSION_DENIED",
                f"{tool} is not allowed for {who}",
                f"tools you may use: {', '.join(allowed) or 'none'}; ask a coordinator "
                "(e.g. product-analyst) to do this, or change mcp.fullAccessCategories / "
                "mcp.allow in config.yaml",
            )
        checked = validate(tool, args, spec.fields)
        try:
            return await spec.handler(self.handlers, checked, caller)
        except AgentNotFoundError as exc:
            raise ToolError(
                "AGENT_NOT_FOUND", exc.message, "call list_agents for the live agent ids"
            ) from exc
        except (TaskNotFoundError, InvalidSlugError) as exc:
            raise ToolError(
                "RESOURCE_NOT_FOUND", exc.message, "call list_tasks for the task slugs"
            ) from exc

    def _allowed(self, caller: Caller) -> tuple[str, ...]:
        return tools_for_category(caller.category, self.orchestrator.config.mcp)

    def _audit(
        self,
        tool: str,
        args: Mapping[str, Any],
        caller: Caller | None,
        outcome: str,
        started: float,
    ) -> None:
        slug = caller.task_slug if caller else _task_of(args)
        entry = {
            "time": utc_now(),
            "tool": tool,
            "callerAgentId": caller.agent_id if caller else None,
            "callerRole": caller.role if caller else None,
            "task": slug,
            "input": {k: _clip(v) for k, v in args.items()},
            "outcome": outcome,
            "durationMs": round((time.monotonic() - started) * 1000, 1),
        }
        if slug is None:
            logger.warning("harness tool call with no task to audit it in: %s", entry)
            return
        try:
            self.orchestrator.store.append_jsonl(slug, AUDIT_LOG, entry)
        except (TaskNotFoundError, InvalidSlugError, OSError):
            logger.warning("could not audit a harness tool call: %s", entry)

    # -- the MCP server --------------------------------------------------------------------

    def _build_server(self, profile: tuple[str, ...]) -> McpSdkServerConfig:
        tools = [
            mt.Tool(
                name=name,
                description=TOOL_SPECS[name].description,
                input_schema=json_schema(TOOL_SPECS[name].fields),
            )
            for name in profile
        ]

        async def on_list_tools(
            _ctx: Any, _params: mt.PaginatedRequestParams | None
        ) -> mt.ListToolsResult:
            return mt.ListToolsResult(tools=tools)

        async def on_call_tool(ctx: Any, params: mt.CallToolRequestParams) -> mt.CallToolResult:
            tool_use_id = (ctx.meta or {}).get(_TOOL_USE_META)
            agent_id = self._callers.get(tool_use_id) if isinstance(tool_use_id, str) else None
            caller = self.caller(agent_id) if agent_id else None
            payload, is_error = await self.call(
                params.name, params.arguments or {}, caller, offered=profile
            )
            text = json.dumps(payload, ensure_ascii=False)
            return mt.CallToolResult(
                content=[mt.TextContent(type="text", text=text)], is_error=is_error
            )

        server: Server[Any] = Server(
            SERVER_NAME, version="1.0.0", on_list_tools=on_list_tools, on_call_tool=on_call_tool
        )
        return McpSdkServerConfig(type="sdk", name=SERVER_NAME, instance=server)


def _task_of(args: Mapping[str, Any]) -> str | None:
    slug = args.get("taskSlug")
    return slug if isinstance(slug, str) and slug else None


def _clip(value: Any) -> Any:
    if isinstance(value, str) and len(value) > _AUDIT_VALUE_LIMIT:
        return value[:_AUDIT_VALUE_LIMIT] + f"… [{len(value) - _AUDIT_VALUE_LIMIT} chars more]"
    return value
