"""The workspace manager's tests run on the workspaces' shared git fixtures."""

from __future__ import annotations

from tests.harness.workspaces import workspace_support

hermetic_git = workspace_support.hermetic_git
project = workspace_support.project
web = workspace_support.web
workspaces = workspace_support.workspaces
