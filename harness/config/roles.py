"""Roles: ``roles/*.md`` files with YAML front matter; the body is the role prompt.

Only this module parses role files. ``parse_role`` is pure; ``load_roles`` reads a folder.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Literal, get_args

import pydantic
import yaml
from pydantic import Field

from harness.config.role_env_schema import role_env
from harness.config.yaml_errors import load_yaml, yaml_syntax_error
from harness.errors import RoleError
from harness.permissions.rules import InvalidRuleError, PermissionRule, parse_rule
from harness.problems import Invalid, NonEmptyStr, describe, did_you_mean, keys_of, problems

logger = logging.getLogger(__name__)

PermissionMode = Literal["default", "acceptEdits", "bypassPermissions", "plan", "dontAsk"]
PERMISSION_MODES: tuple[str, ...] = get_args(PermissionMode)


@dataclass(frozen=True)
class Role:
    name: str
    display_name: str
    category: str
    prompt: str
    source: str
    cwd: Path | None = None
    model: str | None = None
    # The other models a request may pick (`model:opus`); ``model`` is the default.
    models: tuple[str, ...] = ()
    # Every request to it (from a person) gets a plan to approve before any change.
    plan_first: bool = False
    # Built-in Claude Code tools the role may use; None means Claude Code's default set.
    tools: tuple[str, ...] | None = None
    permission_mode: PermissionMode = "default"
    max_turns: int | None = None
    max_budget_usd: float | None = None
    # Permission rules (Claude Code syntax): uses a deny rule matches are refused, uses the
    # allow rules cover run without asking, and every other use is asked of a human.
    allow: tuple[PermissionRule, ...] = ()
    deny: tuple[PermissionRule, ...] = ()
    # An example request for this role, offered to people as a suggested prompt.
    example: str | None = None
    # Environment variables its agents get (besides the allow-list the harness gives all).
    env: Mapping[str, str] = field(default_factory=dict, hash=False)

    def __post_init__(self) -> None:
        # A role rebuilt from JSON (an AgentSpec sent to a worker) carries its rules as lists
        # of mappings: read them back as parsed rules in tuples, so the role compares equal.
        for name in ("allow", "deny"):
            items: Iterable[object] = getattr(self, name)
            object.__setattr__(self, name, tuple(_as_rule(item) for item in items))
        object.__setattr__(self, "models", tuple(self.models))

    @property
    def writes(self) -> bool:
        """Whether its agents can change files or run commands (then they take turns in a
        task's workspace; agents that only read run alongside)."""
        return self.tools is None or bool(_WRITING_TOOLS.intersection(self.tools))


_WRITING_TOOLS = frozenset({"Write", "Edit", "MultiEdit", "NotebookEdit", "Bash"})


def _as_rule(item: object) -> PermissionRule:
    if isinstance(item, PermissionRule):
        return item
    text = item.get("text") if isinstance(item, Mapping) else item
    if not isinstance(text, str):
        raise TypeError(f"expected a permission rule, found {describe(item)}")
    return parse_rule(text)


# Role names appear in routing rules, MCP tool input and Slack text: keep them plain.
_NAME_PATTERN = r"^[a-z0-9][a-z0-9_-]{0,63}$"
# What `model:<name>` in a request can name (harness/agents/directives.py reads it).
_MODEL_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._\-\[\]]{0,63}$"
_FENCE = "---"
_EXAMPLE = "---\nname: developer\ncategory: worker\n---\nYou are a developer..."

# The built-in tools Claude Code CLI 2.1.330 (bundled with claude-agent-sdk 0.2.187) offers an
# agent: read by running that CLI against the scripted model with `tools` set to every name in
# the list of built-in tool names inside the CLI binary, and keeping those it offered the
# model (ModelRequest.tool_names, less StructuredOutput and mcp__*). Without
# `tools:` a role gets these less Glob, Grep and the Task* tools. The CLI drops any other name
# silently (TodoWrite, MultiEdit, AskUserQuestion, ExitPlanMode, LS: known to it, not offered
# to SDK agents; typos like `Bsh`), so a role naming one would run without that tool unnoticed.
# StructuredOutput is left out: the harness adds it to every run for the result.
BUILTIN_TOOLS: tuple[str, ...] = (
    "Agent",
    "Bash",
    "CronCreate",
    "CronDelete",
    "CronList",
    "Edit",
    "EnterWorktree",
    "ExitWorktree",
    "Glob",
    "Grep",
    "ListAgents",
    "Monitor",
    "NotebookEdit",
    "Read",
    "ReportFindings",
    "ScheduleWakeup",
    "SendMessage",
    "Skill",
    "TaskCreate",
    "TaskGet",
    "TaskList",
    "TaskStop",
    "TaskUpdate",
    "WebFetch",
    "WebSearch",
    "Workflow",
    "Write",
)
_TOOLS_EXAMPLE = ["Read", "Glob", "Grep"]
_ALLOW_EXAMPLE = ["Bash(pytest:*)", "Edit(src/**)"]
_DENY_EXAMPLE = ["Bash(git push:*)"]


def _builtin_tool(name: str) -> str:
    if name in BUILTIN_TOOLS:
        return name
    if name.startswith("mcp__"):
        problem = (
            f"{name!r} is not a built-in Claude Code tool name. MCP tools are granted by "
            "category through `mcp` in config.yaml, not here."
        )
        fix = "remove it; give the role's category the tool with `mcp.allow` in config.yaml"
    elif name == "StructuredOutput":
        problem = f"{name!r} is added by the harness to every run, for the structured result"
        fix = "remove it"
    else:
        problem = f"{name!r} is not a built-in tool that Claude Code 2.1.330 offers agents"
        fix = (
            f"{did_you_mean(name, BUILTIN_TOOLS)}use built-in tool names as spelled by Claude "
            f"Code: {', '.join(BUILTIN_TOOLS)}"
        )
    raise Invalid(problem, fix=fix)


def _permission_rule(text: str) -> str:
    try:
        rule = parse_rule(text)
    except InvalidRuleError as exc:
        raise Invalid(f"{text!r}: {exc.problem}", fix=exc.fix) from None
    if not rule.tool.startswith("mcp__") and rule.tool not in BUILTIN_TOOLS:
        raise Invalid(
            f"{text!r} names {rule.tool!r}, not a built-in tool that Claude Code 2.1.330 "
            "offers agents, so the rule would never match",
            fix=f"{did_you_mean(rule.tool, BUILTIN_TOOLS)}name a built-in tool as Claude Code "
            "spells it, e.g. `Bash(pytest:*)`",
        )
    return text


_Rules = list[Annotated[str, pydantic.AfterValidator(_permission_rule)]]


class _FrontMatter(pydantic.BaseModel):
    """The YAML between the `---` lines. Strict: `maxTurns: "3"` is an error, not 3."""

    model_config = pydantic.ConfigDict(extra="forbid", strict=True)

    name: str = Field(
        pattern=_NAME_PATTERN,
        examples=["developer"],
        description="lowercase letters, digits, `-` or `_`, matching the file name",
    )
    display_name: NonEmptyStr | None = Field(None, alias="displayName", examples=["Developer"])
    category: NonEmptyStr = Field(
        examples=["worker"],
        description="`worker`, or `conversational` for coordinator roles that may draft "
        "other agents, or a category named in config.yaml's `mcp` settings",
    )
    cwd: NonEmptyStr | None = Field(
        None, examples=[".."], description="relative to config.yaml's folder"
    )
    model: NonEmptyStr | None = Field(None, examples=["sonnet"])
    models: list[Annotated[str, Field(pattern=_MODEL_PATTERN)]] = Field(
        default_factory=list,
        examples=[["opus", "haiku"]],
        description="other models a request may pick with `model:<name>` (`model` is the "
        "default): Claude CLI aliases or model ids",
    )
    plan_first: bool = Field(
        False,
        alias="planFirst",
        description="every request from a person gets a plan (read-only) to approve first",
    )
    example: NonEmptyStr | None = Field(
        None,
        examples=["plan: a settings page with a dark mode toggle"],
        description="an example request, offered in Slack as a suggested prompt",
    )
    tools: list[Annotated[str, pydantic.AfterValidator(_builtin_tool)]] | None = Field(
        None,
        examples=[_TOOLS_EXAMPLE],
        description="built-in Claude Code tools; leave it out for the default set",
    )
    permission_mode: PermissionMode = Field("default", alias="permissionMode")
    max_turns: int | None = Field(
        None, alias="maxTurns", gt=0, examples=[20], description="leave it out for no limit"
    )
    max_budget_usd: float | None = Field(
        None, alias="maxBudgetUsd", gt=0, examples=[2.5], description="leave it out for no limit"
    )
    allow: _Rules = Field(
        default_factory=list,
        examples=[_ALLOW_EXAMPLE],
        description="Claude Code permission rules for tool uses the role's agents may make "
        "without asking a human",
    )
    deny: _Rules = Field(
        default_factory=list,
        examples=[_DENY_EXAMPLE],
        description="Claude Code permission rules for tool uses always refused; deny wins "
        "over allow",
    )
    env: Annotated[dict[str, str], pydantic.AfterValidator(role_env)] = Field(
        default_factory=dict,
        examples=[{"NODE_OPTIONS": "--max-old-space-size=4096"}],
        description="environment variables its agents get (quote numbers: values are "
        "strings); not secrets: role files are plain text",
    )

    @pydantic.field_validator("tools", "allow", "deny", "models")
    @classmethod
    def _no_duplicates(cls, items: list[str] | None) -> list[str] | None:
        for index, name in enumerate(items or []):
            if name in (items or [])[:index]:
                raise Invalid(f"{name!r} is listed twice", fix="remove the duplicate", at=(index,))
        return items

    @pydantic.model_validator(mode="after")
    def _allowed_or_denied(self) -> _FrontMatter:
        for index, text in enumerate(self.allow):
            if text in self.deny:
                raise Invalid(
                    f"{text!r} is in both allow and deny; deny wins, so the allow entry does "
                    "nothing",
                    fix="remove it from one of the two lists",
                    at=("allow", index),
                )
        return self


KNOWN_FIELDS: tuple[str, ...] = tuple(keys_of(_FrontMatter))


def _split_front_matter(text: str, source: str) -> tuple[str, str]:
    lines = text.lstrip("\ufeff").splitlines()
    if not lines or lines[0].strip() != _FENCE:
        raise RoleError(
            source,
            "(front matter)",
            "the file does not start with a `---` line",
            fix=f"start the file with YAML front matter between `---` lines, e.g.\n{_EXAMPLE}",
        )
    for index in range(1, len(lines)):
        if lines[index].strip() == _FENCE:
            return "\n".join(lines[1:index]), "\n".join(lines[index + 1 :])
    raise RoleError(
        source,
        "(front matter)",
        "the front matter is not closed by a second `---` line",
        fix="add a line `---` after the last front-matter field, before the prompt",
    )


def parse_role(text: str, *, source: str, base_dir: Path) -> Role:
    """Parse one role file. ``base_dir`` (the config file's folder) anchors a relative cwd."""
    front, body = _split_front_matter(text, source)
    try:
        loaded = load_yaml(front) if front.strip() else {}
    except yaml.YAMLError as exc:
        # The front matter starts on the file's second line, below the opening `---`.
        raise yaml_syntax_error(
            RoleError,
            source,
            "(front matter)",
            exc,
            fix="fix the front matter at the line and column shown (`key: value` lines; quote "
            "values holding `: ` or starting with `[`, `{`, `*` or `&`)",
            first_line=2,
        ) from exc
    if not isinstance(loaded, Mapping):
        raise RoleError(
            source,
            "(front matter)",
            f"expected `key: value` lines, found {describe(loaded)}",
            fix=f"write the front matter as a YAML mapping, e.g.\n{_EXAMPLE}",
        )
    try:
        meta = _FrontMatter.model_validate(loaded)
    except pydantic.ValidationError as exc:
        raise RoleError.from_problems(source, problems(exc, _FrontMatter)) from None
    prompt = body.strip()
    if not prompt:
        raise RoleError(
            source,
            "(body)",
            "the role prompt after the front matter is empty",
            fix="write the role's instructions (markdown) after the closing `---` line",
        )
    # normpath, not resolve(): parsing stays free of file-system access.
    cwd = (
        Path(os.path.normpath(base_dir / Path(meta.cwd.strip()).expanduser())) if meta.cwd else None
    )
    return Role(
        name=meta.name,
        display_name=meta.display_name.strip() if meta.display_name else meta.name,
        category=meta.category.strip(),
        prompt=prompt,
        source=source,
        cwd=cwd.absolute() if cwd else None,
        model=meta.model.strip() if meta.model else None,
        models=tuple(meta.models),
        plan_first=meta.plan_first,
        tools=tuple(meta.tools) if meta.tools is not None else None,
        permission_mode=meta.permission_mode,
        max_turns=meta.max_turns,
        max_budget_usd=meta.max_budget_usd,
        allow=tuple(parse_rule(text) for text in meta.allow),
        deny=tuple(parse_rule(text) for text in meta.deny),
        example=meta.example.strip() if meta.example else None,
        env=dict(meta.env),
    )


def load_roles(roles_dir: Path, *, base_dir: Path) -> dict[str, Role]:
    """Every ``*.md`` in ``roles_dir``, keyed by name (which must equal the file stem)."""
    if not roles_dir.is_dir():
        raise RoleError(
            str(roles_dir),
            "(folder)",
            "the roles folder is a file, not a folder"
            if roles_dir.exists()
            else "the roles folder does not exist",
            fix="create it with one <name>.md per role, or point `roles:` in config.yaml to it",
        )
    files = sorted(roles_dir.glob("*.md"))
    if not files:
        raise RoleError(
            str(roles_dir),
            "(folder)",
            "no role files (*.md) in the roles folder",
            fix=f"add at least one role file, e.g. developer.md containing:\n{_EXAMPLE}",
        )
    roles: dict[str, Role] = {}
    for path in files:
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise RoleError(
                str(path), "(file)", f"cannot read: {exc}", fix="make it a readable UTF-8 file"
            ) from exc
        role = parse_role(text, source=str(path), base_dir=base_dir)
        if role.name != path.stem:
            raise RoleError(
                str(path),
                "name",
                f"name {role.name!r} does not match the file name {path.name!r}",
                fix=f"set `name: {path.stem}` or rename the file to {role.name}.md",
            )
        if role.cwd is not None and not role.cwd.is_dir():
            raise RoleError(
                str(path),
                "cwd",
                f"folder {role.cwd} does not exist",
                fix="create it, or fix `cwd:` (relative paths start at config.yaml's folder)",
            )
        roles[role.name] = role
    logger.debug("loaded %d role(s) from %s", len(roles), roles_dir)
    return roles
