"""Which harness MCP tools each role category may use. Pure.

Seed 000: categories in ``mcp.fullAccessCategories`` get the full set, every other category
the read-only set (plus the tools that talk to the task's humans). Seed 002: optional
allow/deny glob patterns per category refine that.
"""

from __future__ import annotations

from fnmatch import fnmatchcase

from harness.config.settings import McpSettings
from harness.runtime.spec import qualified

READ_ONLY_TOOLS: tuple[str, ...] = (
    "list_agents",
    "show_agent",
    "list_tasks",
    "get_task_context",
)
# Talking to the humans of the task (and sharing a file of its folder there): every role may.
HUMAN_TOOLS: tuple[str, ...] = ("ask_human", "update_progress", "log_decision", "share_file")
EVERY_ROLE_TOOLS: tuple[str, ...] = READ_ONLY_TOOLS + HUMAN_TOOLS
# open_pull_request pushes out of the sandbox (after a human approved it): coordinators only.
FULL_ONLY_TOOLS: tuple[str, ...] = ("draft_agent", "await_agent", "kill_agent", "open_pull_request")
ALL_TOOLS: tuple[str, ...] = FULL_ONLY_TOOLS + EVERY_ROLE_TOOLS


def tools_for_category(category: str, settings: McpSettings) -> tuple[str, ...]:
    """The tools (bare names, in ALL_TOOLS order) a role of this category is offered.

    Patterns match either the bare or the qualified name, so ``draft_*`` and
    ``mcp__harness__draft_*`` both work. Deny wins over allow.
    """
    full = category in settings.full_access_categories
    allow = settings.allow.get(category, ())
    deny = settings.deny.get(category, ())

    def matches(tool: str, patterns: tuple[str, ...]) -> bool:
        return any(fnmatchcase(tool, p) or fnmatchcase(qualified(tool), p) for p in patterns)

    chosen = []
    for tool in ALL_TOOLS:
        base = full or tool in EVERY_ROLE_TOOLS
        if (base or matches(tool, allow)) and not matches(tool, deny):
            chosen.append(tool)
    return tuple(chosen)
