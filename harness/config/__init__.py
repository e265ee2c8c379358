"""What a project says: config.yaml, the role files and the routing between them. Parsed and
validated once, at start-up; every mistake names the file, the field and the fix.

Modules: ``schema`` (config.yaml's format: pydantic models with defaults and examples),
``settings`` (the frozen settings it becomes: ``parse_config`` is pure, ``load_config`` reads
the file), ``roles`` (the only parser of ``roles/*.md``), ``routing`` (which role answers a
message).
"""

from harness.config.roles import Role, load_roles, parse_role
from harness.config.routing import Router, validate_routing
from harness.config.settings import (
    Config,
    McpSettings,
    MetadataField,
    RepositorySettings,
    RoutingRule,
    RuntimeSettings,
    SandboxSettings,
    SlackSettings,
    WorkspaceSettings,
    load_config,
    parse_config,
)

__all__ = [
    "Config",
    "McpSettings",
    "MetadataField",
    "RepositorySettings",
    "Role",
    "Router",
    "RoutingRule",
    "RuntimeSettings",
    "SandboxSettings",
    "SlackSettings",
    "WorkspaceSettings",
    "load_config",
    "load_roles",
    "parse_config",
    "parse_role",
    "validate_routing",
]
