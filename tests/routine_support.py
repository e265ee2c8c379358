"""The routines the tests of routines run, as entries of config.yaml's ``routines:`` list, and
a test project's config.yaml with them (no bot imported: the CLI's tests use it too)."""

from __future__ import annotations

from pathlib import Path

# Fires at every minute of its clock, in C0ROUTINE, for U0OWNER.
EVERY_MINUTE = """\
  - name: every-minute
    schedule: "* * * * *"
    channel: C0ROUTINE
    owner: U0OWNER
    role: developer
    prompt: "Find the flakiest test and fix it."
"""
# Fires at each push GitHub delivers, in C0ROUTINE, for U0OWNER.
ON_PUSH = """\
  - name: on-push
    on: {github: [push]}
    channel: C0ROUTINE
    owner: U0OWNER
    role: developer
    prompt: "Check the push to {ref}."
"""


def routines_section(*entries: str) -> str:
    """config.yaml's ``routines:`` section listing ``entries``."""
    return "\nroutines:\n" + "".join(entries)


def with_routines(config: Path, *entries: str) -> Path:
    """``config`` (a test project's config.yaml) with a ``routines:`` section of ``entries``
    added at its end."""
    text = config.read_text(encoding="utf-8")
    config.write_text(text + routines_section(*entries), encoding="utf-8")
    return config
