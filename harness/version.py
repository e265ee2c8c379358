"""The harness's version: the one place it is written (pyproject.toml reads it from here)."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

__version__ = "0.1.0"
# The distribution's name on package indexes ("harness" there is another project); the
# import packages stay `harness` and `bot`, the command `harness`.
DISTRIBUTION = "harness-slack-agents"


def installed_version() -> str:
    """The installed distribution's version, else (a source tree on sys.path, never
    installed) the version written here."""
    try:
        return version(DISTRIBUTION)
    except PackageNotFoundError:
        return __version__
