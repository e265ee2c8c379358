"""Where config.yaml is when no ``--config`` names it, apart from config.yaml's schema: a
command that may not need the schema (``harness tasks`` with its config remembered) finds
the file without importing it."""

from __future__ import annotations

import os
from pathlib import Path


def default_config_path() -> Path:
    """``$HARNESS_CONFIG``, else ``./config.yaml``."""
    return Path(os.environ.get("HARNESS_CONFIG") or "config.yaml")
