"""config.yaml: parsed and validated once, at start-up.

``parse_config`` is pure (a mapping in, a Config out); ``load_config`` reads the file.
Relative paths inside the file are relative to the file's folder.

Every problem is a ConfigError naming the file, the field path (``routing[1].pattern``,
``mcp.maxDepth``), what is wrong and how to fix it, so a typo never starts a half-configured bot.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Literal, Self

import pydantic
import yaml
from pydantic import Field

from harness.errors import ConfigError
from harness.schema import Invalid, NonEmptyStr, describe, did_you_mean, keys_of, problems

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class RoutingRule:
    pattern: re.Pattern[str]
    role: str


@dataclass(frozen=True)
class MetadataField:
    """A per-agent fact collected by running a shell command in the agent's cwd."""

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
class RepositorySettings:
    """A git repository tasks get worktrees of: a local one at ``path``, or ``url`` cloned
    into ``cache`` (exactly one of ``path`` and ``url`` is set; ``cache`` goes with ``url``)."""

    name: str
    path: Path | None = None
    url: str | None = None
    cache: Path | None = None
    base_branch: str = "main"


@dataclass(frozen=True)
class WorkspaceSettings:
    """Where tasks work. No repositories: every task gets a scratch folder under ``root``.

    parse_config makes ``root`` absolute (under the config folder); the relative default here
    only serves a Config built by hand.
    """

    root: Path = Path(".agents/workspaces")
    prune_after_days: float = 14.0
    # Commit what a writing agent left uncommitted on the task's branch when it ends, so the
    # branch itself holds the work.
    commit_work: bool = True
    default: str | None = None  # the repository when a message names none
    channels: Mapping[str, str] = field(default_factory=dict)  # Slack channel id -> repository
    repositories: Mapping[str, RepositorySettings] = field(default_factory=dict)


@dataclass(frozen=True)
class RuntimeSettings:
    """Where agents run: ``local`` (children of this process) or ``nats`` (``harness worker``
    processes reached through a NATS server with JetStream)."""

    kind: Literal["local", "nats"] = "local"
    url: str | None = None
    credentials: Path | None = None  # a NATS .creds file
    tls_ca: Path | None = None  # the CA of the server's TLS certificate
    prefix: str = "harness"  # subjects and streams; one prefix per harness installation
    lost_after_seconds: float = 10.0  # a worker silent this long is lost


@dataclass(frozen=True)
class Config:
    file: Path
    base_dir: Path
    roles_dir: Path
    tasks_dir: Path
    default_role: str
    rules: tuple[RoutingRule, ...]
    # `harness prune-tasks` deletes tasks idle longer than this; None keeps them forever.
    prune_tasks_after_days: float | None = None
    # How often an agent's CLI retries a model API that fails or cannot be reached, before
    # the agent fails with that reason.
    model_api_retries: int = 10
    context_budget_chars: int = 24_000
    ask_timeout_seconds: float = 900.0
    mcp: McpSettings = field(default_factory=McpSettings)
    metadata: tuple[MetadataField, ...] = ()
    slack: SlackSettings = field(default_factory=SlackSettings)
    workspaces: WorkspaceSettings = field(default_factory=WorkspaceSettings)
    # Environment variables (glob patterns) agents never see, on top of every SLACK_* one.
    withhold_env: tuple[str, ...] = ()
    runtime: RuntimeSettings = field(default_factory=RuntimeSettings)


# --- the file's schema: pydantic parses, the dataclasses above stay the domain values -------
# Strict types: YAML's "3" is not an integer and `true` is not a number; unknown keys are
# errors, so a typo never leaves a setting at its default unnoticed. Each field declares its
# example once; every message about that field reuses it.

_MCP = McpSettings()
_SLACK_ID = "U012ABCDEF"


class _Section(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(extra="forbid", strict=True)


class _Rule(_Section):
    pattern: NonEmptyStr = Field(
        examples=["^review\\b"],
        description="a Python regex, matched case-insensitively at the start of the message",
    )
    role: NonEmptyStr = Field(examples=["reviewer"], description="the role that answers")

    @pydantic.field_validator("pattern")
    @classmethod
    def _compiles(cls, value: str) -> str:
        try:
            re.compile(value, re.IGNORECASE)
        except re.error as exc:
            raise Invalid(
                f"invalid regular expression {value!r}: {exc}",
                fix="fix the regex (Python `re` syntax; in YAML single quotes keep backslashes "
                "as written)",
                with_example=True,
            ) from exc
        return value


class _Context(_Section):
    budget_chars: int = Field(24_000, alias="budgetChars", ge=1, examples=[24_000])


class _AskHuman(_Section):
    timeout_seconds: float = Field(
        900.0, alias="timeoutSeconds", gt=0, examples=[900], description="seconds"
    )


class _Mcp(_Section):
    tool_timeout_ms: int = Field(
        _MCP.tool_timeout_ms, alias="toolTimeoutMs", ge=1, examples=[600_000]
    )
    full_access_categories: list[NonEmptyStr] = Field(
        list(_MCP.full_access_categories),
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
    # 0 is meaningful: agents may not draft agents at all.
    max_depth: int = Field(_MCP.max_depth, alias="maxDepth", ge=0, examples=[3])
    max_concurrent_agents: int = Field(
        _MCP.max_concurrent_agents, alias="maxConcurrentAgents", ge=1, examples=[4]
    )
    task_budget_usd: float | None = Field(
        None, alias="taskBudgetUsd", gt=0, examples=[5.0], description="null for no cap"
    )


class _Metadata(_Section):
    command: NonEmptyStr = Field(
        examples=["git rev-parse --abbrev-ref HEAD"],
        description="the shell command whose output is the value",
    )
    description: str | None = Field("", examples=["Current branch"])
    timeout_seconds: float = Field(5.0, alias="timeoutSeconds", gt=0, examples=[5])
    # Seed 001 spells the flag include_in_list; camelCase is accepted too, like everywhere else.
    include_in_list: bool = Field(
        False,
        validation_alias=pydantic.AliasChoices("include_in_list", "includeInList"),
        examples=[True],
    )


class _Slack(_Section):
    allowed_users: list[NonEmptyStr] = Field(
        [], alias="allowedUsers", examples=[[_SLACK_ID]], description="empty: everyone"
    )
    allowed_channels: list[NonEmptyStr] = Field(
        [], alias="allowedChannels", examples=[["C012ABCDEF"]], description="empty: every channel"
    )
    admins: list[NonEmptyStr] = Field([], examples=[[_SLACK_ID]])


# Repository names become folder names and the `repo:NAME` token people type: plain words.
_REPOSITORY_NAME = re.compile(r"^[a-z0-9][a-z0-9_-]{0,63}$")
# What git's check-ref-format refuses in a branch name; a leading "-" would read as an option.
_BAD_BRANCH = re.compile(r"^[-/.]|[\s~^:?*\[\\]|\.\.|@\{|//|/\.|[/.]$|\.lock$")


def _repository_name(value: str) -> str:
    if not _REPOSITORY_NAME.match(value):
        plain = re.sub(r"[^a-z0-9_-]+", "-", value.lower()).strip("-_")[:64]
        hint = f"did you mean {plain!r}? " if _REPOSITORY_NAME.match(plain) else ""
        raise Invalid(
            f"invalid repository name {value!r}",
            fix=f"{hint}use lowercase letters, digits, `-` and `_` (at most 64, starting with a "
            "letter or digit)",
            with_example=True,
        )
    return value


def _branch_name(value: str) -> str:
    if _BAD_BRANCH.search(value):
        raise Invalid(
            f"{value!r} is not a valid git branch name",
            fix="name an existing branch of the repository",
            with_example=True,
        )
    return value


def _not_an_option(value: str) -> str:
    if value.startswith("-"):  # git would read it as an option
        raise Invalid(f"{value!r} starts with '-'", fix="write the address", with_example=True)
    return value


RepositoryName = Annotated[str, pydantic.AfterValidator(_repository_name)]
BranchName = Annotated[NonEmptyStr, pydantic.AfterValidator(_branch_name)]
GitUrl = Annotated[NonEmptyStr, pydantic.AfterValidator(_not_an_option)]


class _Repository(_Section):
    path: NonEmptyStr | None = Field(
        None, examples=["../web"], description="a local git repository; tasks get worktrees of it"
    )
    url: GitUrl | None = Field(
        None,
        examples=["https://git.example.com/api.git"],
        description="a repository the harness clones into `cache` and fetches for each new task",
    )
    cache: NonEmptyStr | None = Field(
        None,
        examples=[".agents/repos/api"],
        description="where the clone of `url` is kept; default <root>/.repos/<name>",
    )
    base_branch: BranchName = Field(
        "main", alias="baseBranch", examples=["main"], description="what task branches start from"
    )

    @pydantic.model_validator(mode="after")
    def _one_source(self) -> Self:
        either = "`path:` (a local git repository) or `url:` (one the harness clones)"
        if self.path is not None and self.url is not None:
            raise Invalid("sets both `path` and `url`", fix=f"keep only one: {either}")
        if self.path is None and self.url is None:
            raise Invalid(
                "needs `path` or `url`",
                fix=f"add {either}, e.g. `{{path: ../web}}` or "
                "`{url: 'https://git.example.com/api.git'}`",
            )
        if self.path is not None and self.cache is not None:
            raise Invalid(
                "`cache` is only for a `url` repository",
                fix="remove `cache:`: a `path` repository is used where it is",
                at=("cache",),
            )
        return self


class _Workspaces(_Section):
    root: NonEmptyStr = Field(
        ".agents/workspaces",
        examples=[".agents/workspaces"],
        description="where each task's worktree or scratch folder is made",
    )
    prune_after_days: float = Field(
        14,
        alias="pruneAfterDays",
        gt=0,
        examples=[14],
        description="`prune` removes the workspaces of tasks idle longer than this",
    )
    commit_work: bool = Field(
        True,
        alias="commitWork",
        examples=[True],
        description="commit a writing agent's uncommitted work on the task's branch when it ends",
    )
    default: NonEmptyStr | None = Field(
        None, examples=["web"], description="the repository when a message names none"
    )
    channels: dict[NonEmptyStr, NonEmptyStr] = Field(
        {}, examples=[{"C0123ABCD": "api"}], description="a default repository per channel id"
    )
    repositories: dict[RepositoryName, _Repository] = Field(
        {}, examples=[{"web": {"path": "../web"}}]
    )

    @pydantic.model_validator(mode="after")
    def _names_are_repositories(self) -> Self:
        named: list[tuple[tuple[str, ...], str]] = []
        if self.default is not None:
            named.append((("default",), self.default))
        named += [(("channels", channel), name) for channel, name in self.channels.items()]
        known = sorted(self.repositories)
        for at, name in named:
            if name not in self.repositories:
                raise Invalid(
                    f"unknown repository {name!r}; known repositories: "
                    f"{', '.join(known) or '(none configured)'}",
                    fix=f"{did_you_mean(name, known)}name one of `workspaces.repositories`, or "
                    f"add it there, e.g. `{name}: {{path: ../{name}}}`",
                    at=at,
                )
        return self


class _Runtime(_Section):
    kind: Literal["local", "nats"] = Field(
        "local", examples=["nats"], description="`local` (this machine) or `nats` (workers)"
    )
    url: NonEmptyStr | None = Field(
        None, examples=["nats://127.0.0.1:4222"], description="the NATS server, for `nats`"
    )
    credentials: NonEmptyStr | None = Field(
        None, examples=["nats.creds"], description="a NATS credentials file (JWT and seed)"
    )
    tls_ca: NonEmptyStr | None = Field(
        None, alias="tlsCa", examples=["ca.pem"], description="the CA of the server's TLS cert"
    )
    prefix: NonEmptyStr = Field(
        "harness",
        pattern=r"^[A-Za-z0-9_-]+$",
        examples=["harness"],
        description="subject and stream prefix, one per installation",
    )
    lost_after_seconds: float = Field(
        10,
        alias="lostAfterSeconds",
        gt=0,
        examples=[10],
        description="a worker silent this long is lost; its agent ends interrupted",
    )

    @pydantic.model_validator(mode="after")
    def _nats_has_a_url(self) -> Self:
        if self.kind == "nats" and self.url is None:
            raise ValueError("`kind: nats` needs the server's `url`, e.g. nats://127.0.0.1:4222")
        return self


class _File(_Section):
    roles: NonEmptyStr = Field("roles", examples=["roles"], description="the roles folder")
    tasks: NonEmptyStr = Field(
        ".agents/tasks", examples=[".agents/tasks"], description="the task store's folder"
    )
    prune_tasks_after_days: float | None = Field(
        None,
        alias="pruneTasksAfterDays",
        gt=0,
        examples=[90],
        description="`harness prune-tasks` deletes tasks idle longer than this; null keeps them",
    )
    model_api_retries: int = Field(
        10,
        alias="modelApiRetries",
        ge=0,
        le=15,  # the CLI clamps CLAUDE_CODE_MAX_RETRIES to 15: a higher value would lie
        examples=[10],
        description="retries of a failing model API call before the agent fails (0 to 15)",
    )
    default_role: NonEmptyStr = Field("developer", alias="defaultRole", examples=["developer"])
    routing: list[_Rule] = Field([], examples=[[{"pattern": "^review\\b", "role": "reviewer"}]])
    context: _Context = Field(default_factory=lambda: _Context.model_validate({}))
    ask_human: _AskHuman = Field(
        default_factory=lambda: _AskHuman.model_validate({}), alias="askHuman"
    )
    mcp: _Mcp = Field(default_factory=lambda: _Mcp.model_validate({}))
    metadata: dict[NonEmptyStr, _Metadata] = Field(
        {}, examples=[{"git_branch": {"command": "git rev-parse --abbrev-ref HEAD"}}]
    )
    slack: _Slack = Field(default_factory=lambda: _Slack.model_validate({}))
    workspaces: _Workspaces = Field(default_factory=lambda: _Workspaces.model_validate({}))
    withhold_env: list[NonEmptyStr] = Field(
        [],
        alias="withholdEnv",
        examples=[["AWS_*", "GITHUB_TOKEN"]],
        description="environment variables (globs) agents never see, besides every SLACK_*",
    )
    runtime: _Runtime = Field(default_factory=lambda: _Runtime.model_validate({}))


def _resolve(base_dir: Path, value: str) -> Path:
    # normpath, not resolve(): keep parse_config free of file-system access.
    return Path(os.path.normpath(base_dir / Path(value).expanduser()))


def _repository(base_dir: Path, root: Path, name: str, raw: _Repository) -> RepositorySettings:
    if raw.path is not None:
        return RepositorySettings(
            name=name, path=_resolve(base_dir, raw.path), base_branch=raw.base_branch
        )
    # A dot folder under root: never a valid task slug, so it never passes for a workspace.
    cache = _resolve(base_dir, raw.cache) if raw.cache else root / ".repos" / name
    return RepositorySettings(name=name, url=raw.url, cache=cache, base_branch=raw.base_branch)


def _workspaces(base_dir: Path, raw: _Workspaces) -> WorkspaceSettings:
    root = _resolve(base_dir, raw.root)
    return WorkspaceSettings(
        root=root,
        prune_after_days=float(raw.prune_after_days),
        commit_work=raw.commit_work,
        default=raw.default,
        channels=dict(raw.channels),
        repositories={
            name: _repository(base_dir, root, name, repo) for name, repo in raw.repositories.items()
        },
    )


def _settings(file: Path, raw: _File) -> Config:
    mcp = raw.mcp
    return Config(
        file=file,
        base_dir=file.parent,
        roles_dir=_resolve(file.parent, raw.roles),
        tasks_dir=_resolve(file.parent, raw.tasks),
        prune_tasks_after_days=(
            float(raw.prune_tasks_after_days) if raw.prune_tasks_after_days is not None else None
        ),
        model_api_retries=raw.model_api_retries,
        default_role=raw.default_role,
        rules=tuple(
            RoutingRule(pattern=re.compile(rule.pattern, re.IGNORECASE), role=rule.role)
            for rule in raw.routing
        ),
        context_budget_chars=raw.context.budget_chars,
        ask_timeout_seconds=raw.ask_human.timeout_seconds,
        mcp=McpSettings(
            tool_timeout_ms=mcp.tool_timeout_ms,
            full_access_categories=tuple(mcp.full_access_categories),
            allow={category: tuple(globs) for category, globs in mcp.allow.items()},
            deny={category: tuple(globs) for category, globs in mcp.deny.items()},
            max_depth=mcp.max_depth,
            max_concurrent_agents=mcp.max_concurrent_agents,
            task_budget_usd=mcp.task_budget_usd,
        ),
        metadata=tuple(
            MetadataField(
                name=name,
                command=entry.command,
                description=entry.description or "",
                timeout_seconds=entry.timeout_seconds,
                include_in_list=entry.include_in_list,
            )
            for name, entry in raw.metadata.items()
        ),
        slack=SlackSettings(
            allowed_users=tuple(raw.slack.allowed_users),
            allowed_channels=tuple(raw.slack.allowed_channels),
            admins=tuple(raw.slack.admins),
        ),
        workspaces=_workspaces(file.parent, raw.workspaces),
        withhold_env=tuple(raw.withhold_env),
        runtime=RuntimeSettings(
            kind=raw.runtime.kind,
            url=raw.runtime.url,
            credentials=_resolve(file.parent, raw.runtime.credentials)
            if raw.runtime.credentials
            else None,
            tls_ca=_resolve(file.parent, raw.runtime.tls_ca) if raw.runtime.tls_ca else None,
            prefix=raw.runtime.prefix,
            lost_after_seconds=float(raw.runtime.lost_after_seconds),
        ),
    )


def parse_config(mapping: Mapping[str, object], *, file: Path) -> Config:
    """Validate a config.yaml mapping; ``file`` names it in errors and anchors relative paths."""
    file = Path(os.path.normpath(file.absolute()))
    try:
        raw = _File.model_validate(mapping)
    except pydantic.ValidationError as exc:
        raise ConfigError.from_problems(str(file), problems(exc, _File)) from None
    config = _settings(file, raw)
    root = config.workspaces.root
    if config.base_dir.is_relative_to(root):
        # Agents never work in the harness's own checkout: no workspace may be it or hold it.
        raise ConfigError(
            str(file),
            "workspaces.root",
            f"{root} holds the harness's own folder ({config.base_dir})",
            fix="point it at a folder of its own, e.g. `root: .agents/workspaces`",
        )
    logger.debug("parsed %s: %d routing rule(s)", file, len(config.rules))
    return config


def load_config(path: Path) -> Config:
    """Read and validate config.yaml. An empty file means "all defaults"."""
    name = str(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError as exc:
        folder = "" if str(path.parent) == "." else f" {path.parent}"
        raise ConfigError(
            name,
            "(file)",
            "file not found",
            fix=f"run `harness init{folder}` to write the shipped config.yaml and roles/ (then "
            "edit them), or point to a config.yaml with --config PATH or $HARNESS_CONFIG",
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
            f"expected a mapping of settings, found {describe(data)}",
            fix=f"write `key: value` lines with keys from: {', '.join(keys_of(_File))}",
        )
    config = parse_config(data, file=path)
    if config.tasks_dir.is_file():
        # The store creates the folder on first use; a file there would fail only then.
        raise ConfigError(
            str(config.file),
            "tasks",
            f"{config.tasks_dir} is a file, not a folder",
            fix="point `tasks:` to a folder (created on first use), e.g. `tasks: .agents/tasks`",
        )
    return config
