"""config.yaml's ``mcp:`` section: the harness tools agents get (per role category: all of
them, or a read-only profile with globs allowed and denied), how deep agents may draft
agents, how many run at once and a task's budget."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from pydantic import Field

from harness.config.section import Section
from harness.problems import NonEmptyStr


class McpSection(Section):
    tool_timeout_ms: int = Field(600_000, alias="toolTimeoutMs", ge=1, examples=[600_000])
    full_access_categories: list[NonEmptyStr] = Field(
        ["conversational"],
        alias="fullAccessCategories",
        examples=[["conversational"]],
        description="role categories that get every harness tool",
    )
    allow: dict[NonEmptyStr, list[NonEmptyStr]] = Field(
        {},
        examples=[{"worker": ["mcp__harness__show_agent"]}],
        description="extra tool-name globs per role category",
    )
    deny: dict[NonEmptyStr, list[NonEmptyStr]] = Field(
        {},
        examples=[{"conversational": ["mcp__harness__kill_agent"]}],
        description="tool-name globs taken away per role category",
    )
    all_tasks_categories: list[NonEmptyStr] = Field(
        [],
        alias="allTasksCategories",
        examples=[["coordinator"]],
        description="role categories whose agents see and act on every task, not only their own",
    )
    # 0 is meaningful: agents may not draft agents at all.
    max_depth: int = Field(3, alias="maxDepth", ge=0, examples=[3])
    max_concurrent_agents: int = Field(4, alias="maxConcurrentAgents", ge=1, examples=[4])
    task_budget_usd: float | None = Field(
        None, alias="taskBudgetUsd", gt=0, examples=[5.0], description="null for no cap"
    )


@dataclass(frozen=True)
class McpSettings:
    tool_timeout_ms: int = 600_000
    full_access_categories: tuple[str, ...] = ("conversational",)
    # Extra glob patterns per role category, on top of the full / read-only profile.
    allow: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    deny: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    max_depth: int = 3
    max_concurrent_agents: int = 4
    task_budget_usd: float | None = None
    # Role categories whose agents see and act on every task; every other agent only its own.
    all_tasks_categories: tuple[str, ...] = ()


def mcp_settings(raw: McpSection) -> McpSettings:
    return McpSettings(
        tool_timeout_ms=raw.tool_timeout_ms,
        full_access_categories=tuple(raw.full_access_categories),
        allow={category: tuple(globs) for category, globs in raw.allow.items()},
        deny={category: tuple(globs) for category, globs in raw.deny.items()},
        max_depth=raw.max_depth,
        max_concurrent_agents=raw.max_concurrent_agents,
        task_budget_usd=raw.task_budget_usd,
        all_tasks_categories=tuple(raw.all_tasks_categories),
    )
