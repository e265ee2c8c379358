"""config.yaml: parsed and validated once, at start-up.

``parse_config`` is pure (a mapping in, a Config out); ``load_config`` reads the file. The
file's format is ``harness.config.schema``; the frozen settings below are what the rest of the
harness sees, each section's built by its own module (``*_schema``). Relative paths inside the
file are relative to the file's folder.

Every problem is a ConfigError naming the file, the field path (``routing[1].pattern``,
``mcp.maxDepth``), what is wrong and how to fix it, so a typo never starts a half-configured bot.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import pydantic
import yaml

from harness.config.forge_schema import GitHubSettings, github_settings
from harness.config.limits_schema import LimitSettings, limit_settings
from harness.config.mcp_schema import McpSettings, mcp_settings
from harness.config.mcp_server_schema import McpServerSettings, mcp_server_settings
from harness.config.metadata_schema import MetadataField, metadata_fields
from harness.config.repository_paths import check_repository_paths
from harness.config.repository_schema import RepositorySettings
from harness.config.routines_schema import Routine, routine_settings
from harness.config.routing_schema import RoutingRule, routing_rules
from harness.config.runtime_schema import RuntimeSettings, runtime_settings
from harness.config.sandbox_schema import SandboxSettings, sandbox_settings
from harness.config.schema import ConfigFile
from harness.config.section import resolve
from harness.config.slack_schema import FileLimits, SlackSettings, slack_settings
from harness.config.spares_schema import (
    DEFAULT_MAX_IDLE,
    DEFAULT_MAX_MEMORY_MB,
    role_counts,
    spare_limit,
)
from harness.config.store_schema import StoreSettings, store_settings
from harness.config.workspaces_schema import WorkspaceSettings, workspace_settings
from harness.config.yaml_errors import load_yaml, yaml_syntax_error
from harness.errors import ConfigError
from harness.problems import describe, keys_of, problems

# Config and what it is made of. Each section's settings live with its schema; most of the
# harness takes one section's, and imports it from here.
__all__ = [
    "Config",
    "FileLimits",
    "GitHubSettings",
    "LimitSettings",
    "McpSettings",
    "MetadataField",
    "RepositorySettings",
    "RuntimeSettings",
    "SandboxSettings",
    "SlackSettings",
    "StoreSettings",
    "WorkspaceSettings",
    "load_config",
    "parse_config",
]

logger = logging.getLogger(__name__)


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
    # What the agents of a person, a channel and a routine may spend per UTC day and month.
    limits: LimitSettings = field(default_factory=LimitSettings)
    metadata: tuple[MetadataField, ...] = ()
    slack: SlackSettings = field(default_factory=SlackSettings)
    workspaces: WorkspaceSettings = field(default_factory=WorkspaceSettings)
    runtime: RuntimeSettings = field(default_factory=RuntimeSettings)
    # Where tasks are kept: the tasks folder, or JetStream on a NATS server.
    store: StoreSettings = field(default_factory=StoreSettings)
    sandbox: SandboxSettings = field(default_factory=SandboxSettings)
    github: GitHubSettings = field(default_factory=GitHubSettings)
    # Agents started ahead per role (spares), in the workspace a new task gets by default
    # (a count) or in named repositories' worktrees (a count each); None: one of the
    # default role.
    spares: Mapping[str, int | Mapping[str, int]] | None = None
    # Tasks last worked on whose next follow-up has a spare waiting in the task's folder.
    follow_up_spares: int = 1
    # Caps on all idle spares together: how many, and their resident memory (MB).
    spares_max_idle: int = DEFAULT_MAX_IDLE
    spares_max_memory_mb: int = DEFAULT_MAX_MEMORY_MB

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
    # Tasks started by a schedule, a GitHub event or an HTTP call (``routines_schema``).
    routines: tuple[Routine, ...] = ()


def _settings(file: Path, raw: ConfigFile) -> Config:
    base_dir = file.parent
    return Config(
        file=file,
        base_dir=base_dir,
        roles_dir=resolve(base_dir, raw.roles),
        tasks_dir=resolve(base_dir, raw.tasks),
        prune_tasks_after_days=(
            float(raw.prune_tasks_after_days) if raw.prune_tasks_after_days is not None else None
        ),
        model_api_retries=raw.model_api_retries,
        default_role=raw.default_role,
        rules=routing_rules(raw.routing),
        context_budget_chars=raw.context.budget_chars,
        ask_timeout_seconds=raw.ask_human.timeout_seconds,
        mcp=mcp_settings(raw.mcp),
        limits=limit_settings(raw.limits),
        metadata=metadata_fields(raw.metadata),
        slack=slack_settings(raw.slack),
        workspaces=workspace_settings(base_dir, raw.workspaces, raw.github),
        runtime=runtime_settings(base_dir, raw.runtime),
        store=store_settings(base_dir, raw.store, raw.runtime),
        sandbox=sandbox_settings(base_dir, raw.sandbox),
        spares=role_counts(raw.spares),
        follow_up_spares=raw.follow_up_spares,
        spares_max_idle=spare_limit(raw.spares, "maxIdle", DEFAULT_MAX_IDLE),
        spares_max_memory_mb=spare_limit(raw.spares, "maxMemoryMb", DEFAULT_MAX_MEMORY_MB),
        github=github_settings(raw.github),
        mcp_server=mcp_server_settings(raw.mcp_server),
        routines=routine_settings(raw.routines),
    )


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
        data = load_yaml(text)
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
    check_repository_paths(config.file, config.workspaces.repositories)
    if config.tasks_dir.is_file():
        # The store creates the folder on first use; a file there would fail only then.
        raise ConfigError(
            str(config.file),
            "tasks",
            f"{config.tasks_dir} is a file, not a folder",
            fix="point `tasks:` to a folder (created on first use), e.g. `tasks: .agents/tasks`",
        )
    return config
