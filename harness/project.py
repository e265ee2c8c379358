"""Loading a project from its config.yaml: config, roles, task store, orchestrator."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from harness.config import Config, load_config
from harness.mcp import HarnessTools
from harness.orchestrator import Orchestrator
from harness.roles import Role, load_roles
from harness.routing import validate_routing
from harness.runtime import AgentRuntime, ClaudeRuntime
from harness.tasks import FileTaskStore


def default_config_path() -> Path:
    """``$HARNESS_CONFIG``, else ``./config.yaml``."""
    return Path(os.environ.get("HARNESS_CONFIG") or "config.yaml")


@dataclass(frozen=True)
class Project:
    config: Config
    roles: Mapping[str, Role]


def load_project(config_path: Path) -> Project:
    """Read and validate config.yaml and the roles it names; fails fast with a clear error."""
    config = load_config(config_path)
    roles = load_roles(config.roles_dir, base_dir=config.base_dir)
    validate_routing(config, roles)
    return Project(config=config, roles=roles)


def build_orchestrator(project: Project, runtime: AgentRuntime | None = None) -> Orchestrator:
    """The orchestrator with the harness MCP tools attached (one server per access profile)."""
    orchestrator = Orchestrator(
        project.config,
        project.roles,
        FileTaskStore(project.config.tasks_dir),
        runtime or ClaudeRuntime(),
    )
    HarnessTools(orchestrator)
    return orchestrator
