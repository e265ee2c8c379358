"""``harness manifest``: the Slack app manifest the bot needs, as the package ships it, for
people who installed the harness with pip and have no checkout to copy ``manifest.yml``
from. Paste it at api.slack.com/apps > Create New App > From an app manifest."""

from __future__ import annotations

import argparse
import sys

from harness.errors import HarnessError

HELP = "print the Slack app manifest (paste it at api.slack.com/apps > From an app manifest)"


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    sub.add_parser(
        "manifest",
        help=HELP,
        description="Print the Slack app manifest the bot needs (its scopes, events, slash "
        "commands, Socket Mode), as shipped with this version: `harness manifest > "
        "manifest.yml`, then api.slack.com/apps > Create New App > From an app manifest.",
    )


def print_manifest() -> int:
    from harness.cli.scaffold import DEFAULTS  # here: `harness --help` never loads it

    try:
        text = (DEFAULTS / "manifest.yml").read_text(encoding="utf-8")
    except OSError as exc:
        raise HarnessError(
            f"the package's manifest.yml cannot be read: {exc}",
            fix="reinstall the harness (`pip install --force-reinstall harness-slack-agents`)",
        ) from exc
    sys.stdout.write(text)
    return 0
