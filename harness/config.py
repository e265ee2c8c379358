"""config.yaml: parsed and validated once, at start-up.

``parse_config`` is pure (a mapping in, a Config out); ``load_config`` reads the file.
Relative paths inside the file are relative to the file's folder.

Every problem is a ConfigError naming the file, the field path (``routing[1].pattern``,
``mcp.maxDepth``), what is wrong and how to fix it, so a typo never starts a half-configured bot.
"""

from __future__ import annotations

import difflib
import logging
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from harness.errors import ConfigError

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class RoutingRule:
    pattern: re.Pattern[str]
    role: str


@dataclass(frozen=True)
class MetadataField:
    """A per-agent fact collected by running a shell command in the agent's cwd (seed 001)."""

    name: str
    command: str
    description: str = ""
    timeout_seconds: float = 5.0
    include_in_list: bool = False


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


@dataclass(frozen=True)
class SlackSettings:
    allowed_users: tuple[str, ...] = ()  # empty: everyone
    allowed_channels: tuple[str, ...] = ()  # empty: every channel
    admins: tuple[str, ...] = ()


@dataclass(frozen=True)
class Config:
    file: Path
    base_dir: Path
    roles_dir: Path
    tasks_dir: Path
    default_role: str
    rules: tuple[RoutingRule, ...]
    context_budget_chars: int = 24_000
    ask_timeout_seconds: float = 900.0
    mcp: McpSettings = field(default_factory=McpSettings)
    metadata: tuple[MetadataField, ...] = ()
    slack: SlackSettings = field(default_factory=SlackSettings)


_TOP_KEYS = (
    "roles",
    "tasks",
    "defaultRole",
    "routing",
    "context",
    "askHuman",
    "mcp",
    "metadata",
    "slack",
)
_RULE_KEYS = ("pattern", "role")
_CONTEXT_KEYS = ("budgetChars",)
_ASK_KEYS = ("timeoutSeconds",)
_MCP_KEYS = (
    "toolTimeoutMs",
    "fullAccessCategories",
    "maxDepth",
    "maxConcurrentAgents",
    "taskBudgetUsd",
    "allow",
    "deny",
)
# Seed 001 spells the flag include_in_list; camelCase is accepted too, like everywhere else.
_METADATA_KEYS = ("command", "description", "timeoutSeconds", "include_in_list", "includeInList")
_SLACK_KEYS = ("allowedUsers", "allowedChannels", "admins")


def _describe(value: object) -> str:
    """How a YAML value reads to a user: its type and a short preview."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return f"a boolean ({str(value).lower()})"
    if isinstance(value, int):
        return f"an integer ({value})"
    if isinstance(value, float):
        return f"a number ({value})"
    if isinstance(value, str):
        preview = value if len(value) <= 40 else value[:37] + "..."
        return f"a string ({preview!r})"
    if isinstance(value, list):
        return f"a list of {len(value)} item(s)"
    if isinstance(value, Mapping):
        return "a mapping"
    return type(value).__name__


class _Parser:
    """Typed readers that turn any mismatch into a ConfigError with the field's path."""

    def __init__(self, file: Path) -> None:
        self.file = str(file)

    def fail(self, path: str, problem: str, fix: str) -> ConfigError:
        return ConfigError(self.file, path, problem, fix=fix)

    def mapping(self, value: object, path: str, known: tuple[str, ...]) -> Mapping[str, object]:
        if not isinstance(value, Mapping):
            raise self.fail(
                path or "(top level)",
                f"expected a mapping, found {_describe(value)}",
                f"write {path or 'it'} as `key: value` lines with keys from: {', '.join(known)}",
            )
        for key in value:
            if key not in known:
                close = difflib.get_close_matches(str(key), known, n=1)
                hint = f"did you mean {close[0]!r}? " if close else ""
                raise self.fail(
                    f"{path}.{key}" if path else str(key),
                    f"unknown key {key!r}",
                    f"{hint}known keys here: {', '.join(known)}",
                )
        return value

    def string(self, value: object, path: str, *, example: str) -> str:
        if not isinstance(value, str) or not value.strip():
            raise self.fail(
                path,
                f"expected a non-empty string, found {_describe(value)}",
                f"set it to a string, e.g. `{example}`",
            )
        return value

    def strings(self, value: object, path: str, *, example: str) -> tuple[str, ...]:
        if not isinstance(value, list):
            raise self.fail(
                path,
                f"expected a list of strings, found {_describe(value)}",
                f"write a YAML list, e.g. `[{example}]` (or `[]` for none)",
            )
        return tuple(
            self.string(item, f"{path}[{index}]", example=example)
            for index, item in enumerate(value)
        )

    def integer(self, value: object, path: str, *, minimum: int) -> int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.fail(
                path,
                f"expected an integer, found {_describe(value)}",
                f"set it to a whole number >= {minimum}",
            )
        if value < minimum:
            raise self.fail(
                path, f"must be >= {minimum}, found {value}", f"set it to {minimum} or more"
            )
        return value

    def positive_number(self, value: object, path: str) -> float:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise self.fail(
                path,
                f"expected a number, found {_describe(value)}",
                "set it to a number greater than 0",
            )
        if value <= 0:
            raise self.fail(
                path, f"must be greater than 0, found {value}", "set it to a number above 0"
            )
        return float(value)

    def boolean(self, value: object, path: str) -> bool:
        if not isinstance(value, bool):
            raise self.fail(
                path, f"expected true or false, found {_describe(value)}", "write true or false"
            )
        return value

    def patterns(self, value: object, path: str) -> Mapping[str, tuple[str, ...]]:
        """``{category: [glob, ...]}`` for mcp.allow / mcp.deny."""
        if not isinstance(value, Mapping):
            raise self.fail(
                path,
                f"expected a mapping of role category to glob list, found {_describe(value)}",
                f'write e.g. `{path.rsplit(".", 1)[-1]}: {{worker: ["mcp__harness__list_*"]}}`',
            )
        result: dict[str, tuple[str, ...]] = {}
        for category, globs in value.items():
            name = self.string(category, f"{path}.{category}", example="worker")
            result[name] = self.strings(
                globs, f"{path}.{category}", example='"mcp__harness__list_*"'
            )
        return result


def _resolve(base_dir: Path, value: str) -> Path:
    # normpath, not resolve(): keep parse_config free of file-system access.
    return Path(os.path.normpath(base_dir / Path(value).expanduser()))


def _routing(p: _Parser, value: object) -> tuple[RoutingRule, ...]:
    if not isinstance(value, list):
        raise p.fail(
            "routing",
            f"expected a list of rules, found {_describe(value)}",
            "write `routing:` followed by `- pattern: '^review\\b'` / `  role: reviewer` items",
        )
    rules: list[RoutingRule] = []
    for index, item in enumerate(value):
        path = f"routing[{index}]"
        rule = p.mapping(item, path, _RULE_KEYS)
        for key in _RULE_KEYS:
            if key not in rule:
                raise p.fail(
                    f"{path}.{key}",
                    "missing",
                    "each routing rule needs both `pattern` (a regex) and `role` (a role name)",
                )
        source = p.string(rule["pattern"], f"{path}.pattern", example="^review\\b")
        role = p.string(rule["role"], f"{path}.role", example="reviewer")
        try:
            compiled = re.compile(source, re.IGNORECASE)
        except re.error as exc:
            raise p.fail(
                f"{path}.pattern",
                f"invalid regular expression {source!r}: {exc}",
                "fix the regex (Python `re` syntax; in YAML single quotes keep backslashes "
                "as written, e.g. '^review\\b')",
            ) from exc
        rules.append(RoutingRule(pattern=compiled, role=role))
    return tuple(rules)


def _mcp(p: _Parser, value: object) -> McpSettings:
    section = p.mapping(value, "mcp", _MCP_KEYS)
    defaults = McpSettings()
    budget: float | None = defaults.task_budget_usd
    if section.get("taskBudgetUsd") is not None:
        budget = p.positive_number(section["taskBudgetUsd"], "mcp.taskBudgetUsd")
    return McpSettings(
        tool_timeout_ms=p.integer(
            section.get("toolTimeoutMs", defaults.tool_timeout_ms), "mcp.toolTimeoutMs", minimum=1
        ),
        full_access_categories=p.strings(
            section.get("fullAccessCategories", list(defaults.full_access_categories)),
            "mcp.fullAccessCategories",
            example="conversational",
        ),
        allow=p.patterns(section.get("allow", {}), "mcp.allow"),
        deny=p.patterns(section.get("deny", {}), "mcp.deny"),
        # 0 is meaningful: agents may not draft agents at all.
        max_depth=p.integer(section.get("maxDepth", defaults.max_depth), "mcp.maxDepth", minimum=0),
        max_concurrent_agents=p.integer(
            section.get("maxConcurrentAgents", defaults.max_concurrent_agents),
            "mcp.maxConcurrentAgents",
            minimum=1,
        ),
        task_budget_usd=budget,
    )


def _metadata(p: _Parser, value: object) -> tuple[MetadataField, ...]:
    if not isinstance(value, Mapping):
        raise p.fail(
            "metadata",
            f"expected a mapping of field name to settings, found {_describe(value)}",
            'write e.g. `metadata: {git_branch: {command: "git rev-parse --abbrev-ref HEAD"}}`',
        )
    fields: list[MetadataField] = []
    for name, raw in value.items():
        path = f"metadata.{name}"
        p.string(name, path, example="git_branch")
        section = p.mapping(raw, path, _METADATA_KEYS)
        if "command" not in section:
            raise p.fail(
                f"{path}.command",
                "missing",
                'give the shell command whose output is the value, e.g. `command: "git status"`',
            )
        description = section.get("description", "")
        flag = section.get("include_in_list", section.get("includeInList", False))
        fields.append(
            MetadataField(
                name=str(name),
                command=p.string(section["command"], f"{path}.command", example="git status"),
                description=(
                    p.string(description, f"{path}.description", example="Current branch")
                    if description
                    else ""
                ),
                timeout_seconds=p.positive_number(
                    section.get("timeoutSeconds", 5.0), f"{path}.timeoutSeconds"
                ),
                include_in_list=p.boolean(flag, f"{path}.include_in_list"),
            )
        )
    return tuple(fields)


def _slack(p: _Parser, value: object) -> SlackSettings:
    section = p.mapping(value, "slack", _SLACK_KEYS)
    return SlackSettings(
        allowed_users=p.strings(
            section.get("allowedUsers", []), "slack.allowedUsers", example="U012ABCDEF"
        ),
        allowed_channels=p.strings(
            section.get("allowedChannels", []), "slack.allowedChannels", example="C012ABCDEF"
        ),
        admins=p.strings(section.get("admins", []), "slack.admins", example="U012ABCDEF"),
    )


def parse_config(mapping: Mapping[str, object], *, file: Path) -> Config:
    """Validate a config.yaml mapping; ``file`` names it in errors and anchors relative paths."""
    file = Path(os.path.normpath(file.absolute()))
    base_dir = file.parent
    p = _Parser(file)
    top = p.mapping(mapping, "", _TOP_KEYS)

    roles_dir = _resolve(base_dir, p.string(top.get("roles", "roles"), "roles", example="roles"))
    tasks_dir = _resolve(
        base_dir, p.string(top.get("tasks", ".agents/tasks"), "tasks", example=".agents/tasks")
    )
    default_role = p.string(top.get("defaultRole", "developer"), "defaultRole", example="developer")
    rules = _routing(p, top.get("routing", []))

    context = p.mapping(top.get("context", {}), "context", _CONTEXT_KEYS)
    budget = p.integer(context.get("budgetChars", 24_000), "context.budgetChars", minimum=1)
    ask = p.mapping(top.get("askHuman", {}), "askHuman", _ASK_KEYS)
    ask_timeout = p.positive_number(ask.get("timeoutSeconds", 900), "askHuman.timeoutSeconds")

    config = Config(
        file=file,
        base_dir=base_dir,
        roles_dir=roles_dir,
        tasks_dir=tasks_dir,
        default_role=default_role,
        rules=rules,
        context_budget_chars=budget,
        ask_timeout_seconds=ask_timeout,
        mcp=_mcp(p, top.get("mcp", {})),
        metadata=_metadata(p, top.get("metadata", {})),
        slack=_slack(p, top.get("slack", {})),
    )
    logger.debug("parsed %s: %d routing rule(s)", file, len(rules))
    return config


def load_config(path: Path) -> Config:
    """Read and validate config.yaml. An empty file means "all defaults"."""
    name = str(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError as exc:
        raise ConfigError(
            name,
            "(file)",
            "file not found",
            fix="create it (copy the config.yaml shipped with the harness), or point to one "
            "with --config PATH or the HARNESS_CONFIG environment variable",
        ) from exc
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(
            name,
            "(file)",
            f"cannot read the file: {exc}",
            fix="make it a readable UTF-8 text file",
        ) from exc
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigError(
            name,
            "(file)",
            f"YAML syntax error: {exc}",
            fix="fix the YAML at the line and column shown (indent with spaces, quote regexes)",
        ) from exc
    if data is None:
        data = {}
    if not isinstance(data, Mapping):
        raise ConfigError(
            name,
            "(top level)",
            f"expected a mapping of settings, found {_describe(data)}",
            fix=f"write `key: value` lines with keys from: {', '.join(_TOP_KEYS)}",
        )
    return parse_config(data, file=path)
