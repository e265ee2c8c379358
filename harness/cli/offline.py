"""The terminal's words for running offline: the note of ``--scripted`` (agents on the
scripted model, ``harness.opening``), the credentials an offline demo leaves unused, and how
to run ``harness`` from here.

Whether agents here can reach a model, and the scripted model's environment, are the core's
(``harness/runtime/model_access.py``); they are named here too for the demos, tests and
benchmarks that import them from here.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from pathlib import Path

from harness.runtime.model_access import (
    KEY_VARIABLES,
    PROVIDER_SWITCHES,
    model_access,
    require_model_access,
    scripted_env,
)

__all__ = [
    "KEY_VARIABLES",
    "PROVIDER_SWITCHES",
    "SCRIPTED_NOTE",
    "exported_keys",
    "harness_command",
    "model_access",
    "require_model_access",
    "scripted_env",
]

SCRIPTED_NOTE = (
    "--scripted: the agents talk to the scripted demo model on this machine, not to Claude "
    "(offline, no API key used)"
)


def exported_keys(environ: Mapping[str, str]) -> list[str]:
    """The model and Slack credentials set in ``environ`` (names only), for saying that an
    offline demo leaves them unused."""
    names = [*KEY_VARIABLES, "SLACK_BOT_TOKEN", "SLACK_APP_TOKEN"]
    return [name for name in names if environ.get(name)]


def harness_command() -> str:
    """How to run ``harness`` from here: the script installed next to this Python (a .venv's
    bin/ is seldom on PATH), else ``python -m harness``."""
    script = Path(sys.executable).parent / "harness"
    if script.exists():
        try:
            return str(script.relative_to(Path.cwd()))
        except ValueError:
            return str(script)
    return f"{sys.executable} -m harness"
