"""An environment variable's name: what config.yaml accepts where it names one (a role's
``env:``, a forge's or an MCP token's ``tokenEnv``) and what the sandbox passes. Pure."""

from __future__ import annotations

import re

# A name a /bin/sh script can expand: the sandbox's launcher passes the agent's environment
# by shell, so no other name can reach an agent, and config refuses one up front.
SHELL_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
