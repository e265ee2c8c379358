"""The harness's version: the one place it is written (pyproject.toml reads it from here)."""

from __future__ import annotations

__version__ = "0.1.0"
# The distribution's name on package indexes ("harness" there is another project); the
# import packages stay `harness` and `bot`, the command `harness`.
DISTRIBUTION = "harness-slack-agents"


def installed_version() -> str:
    """The installed distribution's version, else (a source tree on sys.path, never
    installed) the version written here."""
    # Imported here: importlib.metadata costs tens of ms, and `import harness` reads this module.
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(DISTRIBUTION)
    except PackageNotFoundError:
        return __version__
