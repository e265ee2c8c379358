"""The tool gateway: every harness tool call an agent makes comes through ``call``.

The runtime gives each agent its own ``harness`` MCP server, which names the calling agent on
every call. Here each call is checked against the caller's access profile, validated, served
by its handler (``handlers``, ``task_handlers``, ``forge_handlers``), and appended to the
task's audit log.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from harness.agents.services import Services
from harness.agents.task_desk import AUDIT_LOG
from harness.config.roles import Role
from harness.errors import AgentNotFoundError, InvalidSlugError, TaskNotFoundError, ToolError
from harness.runtime.spec import Approval, ToolDeclaration, ToolReply
from harness.tools import file_handlers, forge_handlers, handlers, task_handlers
from harness.tools.access import ALL_TOOLS, tools_for_category
from harness.tools.approvals import Approvals
from harness.tools.registry import TOOLS, Caller
from harness.tools.validation import validate

__all__ = ["AUDIT_LOG", "HarnessTools"]

logger = logging.getLogger(__name__)

# The handler modules declare their tools in TOOLS as they are imported.
_DECLARED = (handlers, task_handlers, forge_handlers, file_handlers)

_AUDIT_VALUE_LIMIT = 2000


class HarnessTools:
    """The tool provider of the core's services: declarations per role, and the calls."""

    def __init__(self, services: Services) -> None:
        self._services = services
        self._profiles: dict[str, tuple[ToolDeclaration, ...]] = {}
        self._approvals = Approvals(services)

    async def approve(self, agent_id: str, tool: str, args: Mapping[str, Any]) -> Approval:
        """Whether an agent's built-in tool call may run: its role's rules, else a human."""
        return await self._approvals.approve(agent_id, tool, args)

    def declarations(self, role: Role) -> tuple[ToolDeclaration, ...]:
        """The tools a role is offered, by its category (decided once per category)."""
        profile = self._profiles.get(role.category)
        if profile is None:
            names = self._allowed(role.category)
            profile = tuple(TOOLS[name].declaration() for name in names)
            self._profiles[role.category] = profile
        return profile

    def caller(self, agent_id: str) -> Caller | None:
        """The live agent behind a call; None when it is not live."""
        info = self._services.lifecycle.agent(agent_id)
        if info is None:
            return None
        role = self._services.lifecycle.role(info.role)
        all_tasks = role.category in self._services.config.mcp.all_tasks_categories
        return Caller(
            info.agent_id, role.name, role.category, info.task_slug, info.depth, all_tasks
        )

    async def call(self, agent_id: str, tool: str, args: Mapping[str, Any]) -> ToolReply:
        """A call from a running agent's MCP server, made in that agent's name."""
        caller = self.caller(agent_id)
        if caller is None:
            error = ToolError(
                "AGENT_NOT_FOUND",
                f"agent {agent_id} is not running, so it cannot call {tool}",
                "finish with your structured result",
            )
            return ToolReply(error.to_json(), True)
        return await self.invoke(tool, args, caller)

    async def invoke(self, tool: str, args: Mapping[str, Any], caller: Caller | None) -> ToolReply:
        """Run one tool call for ``caller`` (None: the harness itself, every tool allowed).
        Never raises: failures are tool errors with a code, a message and a suggestion."""
        started = self._services.clock.monotonic()
        try:
            payload = await self._dispatch(tool, args, caller)
            reply, outcome = ToolReply(payload), "ok"
        except ToolError as exc:
            reply, outcome = ToolReply(exc.to_json(), True), exc.code
        except Exception as exc:  # the tool boundary: one bad call must not take the harness down
            logger.exception("harness tool %s failed", tool)
            error = ToolError(
                "INTERNAL_ERROR",
                f"{tool} failed inside the harness: {exc}",
                "retry once; if it fails again, report it to the humans in your result",
            )
            reply, outcome = ToolReply(error.to_json(), True), error.code
        self._audit(tool, args, caller, outcome, started)
        return reply

    async def _dispatch(
        self, tool: str, args: Mapping[str, Any], caller: Caller | None
    ) -> dict[str, Any]:
        spec = TOOLS.get(tool)
        if spec is None:
            raise ToolError(
                "TOOL_NOT_FOUND",
                f"no harness tool {tool!r}",
                f"the harness tools are: {', '.join(ALL_TOOLS)}",
            )
        allowed = self._allowed(caller.category) if caller else ALL_TOOLS
        if tool not in allowed:
            who = f"role {caller.role!r} (category {caller.category!r})" if caller else "caller"
            raise ToolError(
                "PERMISSION_DENIED",
                f"{tool} is not allowed for {who}",
                f"tools you may use: {', '.join(allowed) or 'none'}; ask a coordinator "
                "(e.g. product-analyst) to do this, or change mcp.fullAccessCategories / "
                "mcp.allow in config.yaml",
            )
        checked = validate(tool, args, spec.input)
        try:
            return await spec.handler(self._services, caller, checked)
        except AgentNotFoundError as exc:
            raise ToolError(
                "AGENT_NOT_FOUND", exc.message, "call list_agents for the live agent ids"
            ) from exc
        except (TaskNotFoundError, InvalidSlugError) as exc:
            raise ToolError(
                "RESOURCE_NOT_FOUND", exc.message, "call list_tasks for the task slugs"
            ) from exc

    def _allowed(self, category: str) -> tuple[str, ...]:
        return tools_for_category(category, self._services.config.mcp)

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
            "time": self._services.lifecycle.now(),
            "tool": tool,
            "callerAgentId": caller.agent_id if caller else None,
            "callerRole": caller.role if caller else None,
            "task": slug,
            "input": {k: _clip(v) for k, v in args.items()},
            "outcome": outcome,
            "durationMs": round((self._services.clock.monotonic() - started) * 1000, 1),
        }
        if slug is None:
            logger.warning("harness tool call with no task to audit it in: %s", entry)
            return
        try:
            self._services.tasks.audit(slug, entry)
        except (TaskNotFoundError, InvalidSlugError, OSError):
            logger.warning("could not audit a harness tool call: %s", entry)


def _task_of(args: Mapping[str, Any]) -> str | None:
    slug = args.get("taskSlug")
    return slug if isinstance(slug, str) and slug else None


def _clip(value: Any) -> Any:
    if isinstance(value, str) and len(value) > _AUDIT_VALUE_LIMIT:
        return value[:_AUDIT_VALUE_LIMIT] + f"… [{len(value) - _AUDIT_VALUE_LIMIT} chars more]"
    return value
