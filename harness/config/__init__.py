"""What a project says: config.yaml, the role files and the routing between them. Parsed and
validated once, at start-up; every mistake names the file, the field and the fix.

Modules: ``schema`` (config.yaml's format: pydantic models with defaults and examples),
``settings`` (the frozen settings it becomes: ``parse_config`` is pure, ``load_config`` reads
the file), a ``*_schema`` per section (its model and its settings, e.g. ``slack_schema``,
``workspaces_schema``), ``roles`` (the only parser of ``roles/*.md``), ``routing`` (which role
answers a message).
"""

from harness.config.mcp_schema import McpSettings
from harness.config.metadata_schema import MetadataField
from harness.config.repository_schema import RepositorySettings
from harness.config.roles import Role, load_roles, parse_role
from harness.config.routing import Router, validate_routing
from harness.config.routing_schema import RoutingRule
from harness.config.runtime_schema import RuntimeSettings
from harness.config.sandbox_schema import SandboxSettings
from harness.config.settings import Config, load_config, parse_config
from harness.config.slack_schema import SlackSettings
from harness.config.workspaces_schema import WorkspaceSettings

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
