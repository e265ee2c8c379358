"""config.yaml: parsed and validated once, at start-up.

``parse_config`` is pure (a mapping in, a Config out); ``load_config`` reads the file. The
file's format is ``harness.config.schema``; the frozen settings below are what the rest of the
harness sees. Relative paths inside the file are relative to the file's folder.

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
from typing import Literal, TypeVar

import pydantic
import yaml

from harness.config.forge_schema import GitHubSection, RepositoryGitHub
from harness.config.mcp_server_schema import McpServerSettings, mcp_server_settings
from harness.config.sandbox_schema import SandboxSettings as SandboxSettings
from harness.config.sandbox_schema import sandbox_settings
from harness.config.schema import ConfigFile, RepositoryEntry, WorkspacesSection
from harness.errors import ConfigError, FileFieldError
from harness.problems import describe, keys_of, problems

logger = logging.getLogger(__name__)

_E = TypeVar("_E", bound=FileFieldError)


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
    # Role categories whose agents see and act on every task; every other agent only its own.
    all_tasks_categories: tuple[str, ...] = ()


@dataclass(frozen=True)
class FileLimits:
    """What a request may attach (per file, per message), and what an agent may share."""

    max_bytes: int = 10 * 1024 * 1024
    max_count: int = 10


@dataclass(frozen=True)
class SlackSettings:
    allowed_users: tuple[str, ...] = ()  # empty: everyone
    allowed_channels: tuple[str, ...] = ()  # empty: every channel
    admins: tuple[str, ...] = ()
    files: FileLimits = field(default_factory=FileLimits)


@dataclass(frozen=True)
class GitHubAppSettings:
    app_id: int
    private_key_file: Path
    installation_id: int | None = None  # None: GitHub says, per repository


@dataclass(frozen=True)
class GitHubRepository:
    """Where a repository's pull requests are opened: ``owner/name`` on the API at
    ``api_url``, as the bot (the token in ``token_env``, or a GitHub App installation)."""

    full_name: str
    api_url: str = "https://api.github.com"
    web_url: str = "https://github.com"
    token_env: str = "GITHUB_TOKEN"
    app: GitHubAppSettings | None = None


@dataclass(frozen=True)
class GitHubSettings:
    """Shared by every GitHub repository: where the API and the sign-in are, the client id
    people link their accounts with, and how pull requests' checks are followed."""

    api_url: str = "https://api.github.com"
    web_url: str = "https://github.com"
    client_id: str | None = None
    follow_checks: bool = True
    check_poll_seconds: float = 15.0
    auto_fix_tries: int = 0
    draft: bool = False


@dataclass(frozen=True)
class RepositorySettings:
    """A git repository tasks get worktrees of: a local one at ``path``, or ``url`` cloned
    into ``cache`` (exactly one of ``path`` and ``url`` is set; ``cache`` goes with ``url``).
    Task branches are pushed to ``remote`` (a ``path`` repository's) or ``url``."""

    name: str
    path: Path | None = None
    url: str | None = None
    cache: Path | None = None
    base_branch: str = "main"
    remote: str = "origin"
    github: GitHubRepository | None = None


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
    runtime: RuntimeSettings = field(default_factory=RuntimeSettings)
    sandbox: SandboxSettings = field(default_factory=SandboxSettings)
    github: GitHubSettings = field(default_factory=GitHubSettings)
    # Agents started ahead per role (spares), in the workspace a new task gets by default
    # (a count) or in named repositories' worktrees (a count each); None: one of the
    # default role.
    spares: Mapping[str, int | Mapping[str, int]] | None = None
    # Tasks last worked on whose next follow-up has a spare waiting in the task's folder.
    follow_up_spares: int = 1

    @property
    def spare_counts(self) -> Mapping[str, int]:
        """How many spares of each role the harness keeps in the workspace a new task gets
        by default."""
        spares = self.spares if self.spares is not None else {self.default_role: 1}
        return {role: count for role, count in spares.items() if isinstance(count, int)}

    @property
    def repository_spare_counts(self) -> Mapping[tuple[str, str], int]:
        """How many spares of a role the harness keeps in a named repository's worktrees:
        (role, repository) -> count."""
        return {
            (role, repository): count
            for role, counts in (self.spares or {}).items()
            if not isinstance(counts, int)
            for repository, count in counts.items()
        }

    # Who may reach `harness mcp --transport http`: bearer tokens, each a Slack user's.
    mcp_server: McpServerSettings = field(default_factory=McpServerSettings)


def _resolve(base_dir: Path, value: str) -> Path:
    # normpath, not resolve(): keep parse_config free of file-system access.
    return Path(os.path.normpath(base_dir / Path(value).expanduser()))


def _github(base_dir: Path, shared: GitHubSection, raw: RepositoryGitHub) -> GitHubRepository:
    app = raw.app
    return GitHubRepository(
        full_name=raw.repository,
        api_url=(raw.api_url or shared.api_url).rstrip("/"),
        web_url=shared.web_url,
        token_env=raw.token_env,
        app=GitHubAppSettings(
            app_id=app.id,
            private_key_file=_resolve(base_dir, app.private_key_file),
            installation_id=app.installation_id,
        )
        if app
        else None,
    )


def _repository(
    base_dir: Path, root: Path, name: str, raw: RepositoryEntry, shared: GitHubSection
) -> RepositorySettings:
    github = _github(base_dir, shared, raw.github) if raw.github else None
    if raw.path is not None:
        path = _resolve(base_dir, raw.path)
        return RepositorySettings(
            name=name, path=path, base_branch=raw.base_branch, remote=raw.remote, github=github
        )
    # A dot folder under root: never a valid task slug, so it never passes for a workspace.
    cache = _resolve(base_dir, raw.cache) if raw.cache else root / ".repos" / name
    return RepositorySettings(
        name=name, url=raw.url, cache=cache, base_branch=raw.base_branch, github=github
    )


def _workspaces(base_dir: Path, raw: WorkspacesSection, shared: GitHubSection) -> WorkspaceSettings:
    root = _resolve(base_dir, raw.root)
    return WorkspaceSettings(
        root=root,
        prune_after_days=float(raw.prune_after_days),
        commit_work=raw.commit_work,
        default=raw.default,
        channels=dict(raw.channels),
        repositories={
            name: _repository(base_dir, root, name, repo, shared)
            for name, repo in raw.repositories.items()
        },
    )


def _settings(file: Path, raw: ConfigFile) -> Config:
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
            all_tasks_categories=tuple(mcp.all_tasks_categories),
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
            files=FileLimits(raw.slack.files.max_bytes, raw.slack.files.max_count),
        ),
        workspaces=_workspaces(file.parent, raw.workspaces, raw.github),
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
        sandbox=sandbox_settings(file.parent, raw.sandbox),
        spares=dict(raw.spares) if raw.spares is not None else None,
        follow_up_spares=raw.follow_up_spares,
        github=GitHubSettings(
            api_url=raw.github.api_url,
            web_url=raw.github.web_url,
            client_id=raw.github.client_id,
            follow_checks=raw.github.follow_checks,
            check_poll_seconds=float(raw.github.check_poll_seconds),
            auto_fix_tries=raw.github.auto_fix_tries,
            draft=raw.github.draft,
        ),
        mcp_server=mcp_server_settings(raw.mcp_server),
    )


def yaml_syntax_error(
    kind: type[_E], file: str, field: str, exc: yaml.YAMLError, *, fix: str, first_line: int = 1
) -> _E:
    """A YAML syntax error as one line, ``file:line:column: problem``, not PyYAML's multi-line
    text about ``<unicode string>``. ``first_line`` is the file's line the parsed text starts at
    (a role's front matter starts below its `---`)."""
    problem = "YAML syntax error"
    where = file
    if isinstance(exc, yaml.MarkedYAMLError):
        problem += f": {exc.problem or 'invalid YAML'}"
        if exc.problem_mark is not None:
            mark = exc.problem_mark
            where = f"{file}:{mark.line + first_line}:{mark.column + 1}"
        if exc.context:
            context = exc.context
            if exc.context_mark is not None and exc.context_mark != exc.problem_mark:
                start = exc.context_mark
                context += f" started at {start.line + first_line}:{start.column + 1}"
            problem += f" ({context})"
    else:
        problem += f": {exc}"
    error = kind(file, field, problem, fix=fix)
    error.message = f"{where}: {problem}"
    error.args = (error.message,)
    return error


def parse_config(mapping: Mapping[str, object], *, file: Path) -> Config:
    """Validate a config.yaml mapping; ``file`` names it in errors and anchors relative paths."""
    file = Path(os.path.normpath(file.absolute()))
    try:
        raw = ConfigFile.model_validate(mapping)
    except pydantic.ValidationError as exc:
        raise ConfigError.from_problems(str(file), problems(exc, ConfigFile)) from None
    config = _settings(file, raw)
    if raw.withhold_env:
        # Agents get an allow-list now: nothing left to withhold, and an old file still loads.
        logger.warning(
            "%s: withholdEnv is no longer used (agents get only an allow-list of environment "
            "variables; sandbox.passEnv adds to it): remove it",
            file,
        )
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
    """Read and validate config.yaml (``path`` may be its folder). An empty file means "all
    defaults"."""
    if path.is_dir():  # `--config DIR`, HARNESS_CONFIG=DIR: the config.yaml in it
        path = path / "config.yaml"
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
        raise yaml_syntax_error(
            ConfigError,
            name,
            "(file)",
            exc,
            fix="fix the YAML at the line and column shown (indent with spaces, quote regexes)",
        ) from exc
    if data is None:
        data = {}
    if not isinstance(data, Mapping):
        raise ConfigError(
            name,
            "(top level)",
            f"expected a mapping of settings, found {describe(data)}",
            fix=f"write `key: value` lines with keys from: {', '.join(keys_of(ConfigFile))}",
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
