"""``harness bot``: registered into the harness CLI through the harness.commands entry point."""

from __future__ import annotations

import argparse

from harness.project import Project


def register(
    subparsers: argparse._SubParsersAction[argparse.ArgumentParser],
    common: argparse.ArgumentParser,
) -> None:
    parser = subparsers.add_parser(
        "bot",
        parents=[common],
        help="run the Slack bot (Socket Mode with SLACK_APP_TOKEN, else HTTP)",
        description="Run the Slack bot. Socket Mode when SLACK_APP_TOKEN is set, else HTTP "
        "mode serving POST /slack/events.",
    )
    parser.add_argument("--mode", choices=("socket", "http"), help="force a connection mode")
    parser.add_argument("--port", type=int, default=3000, help="HTTP mode port (default 3000)")
    parser.set_defaults(handler=run)


def run(project: Project, args: argparse.Namespace) -> int:
    raise NotImplementedError("the Slack bot is being built")
