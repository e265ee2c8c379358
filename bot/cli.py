"""``harness bot``: registered into the harness CLI through the harness.commands entry point."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from harness.cli.parser import LOG_INFO

if TYPE_CHECKING:  # every `harness` command registers `bot`: config.yaml's schema waits
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
        "mode serving POST /slack/events. SLACK_BOT_TOKEN is always needed, "
        "SLACK_SIGNING_SECRET in HTTP mode; SLACK_API_URL overrides https://slack.com/api/.",
    )
    parser.add_argument("--mode", choices=("socket", "http"), help="force a connection mode")
    parser.add_argument("--port", type=int, default=3000, help="HTTP mode port (default 3000)")
    parser.add_argument(
        "--host", default="0.0.0.0", help="HTTP mode address to listen on (default 0.0.0.0)"
    )
    parser.add_argument(
        "--health-port",
        type=int,
        metavar="N",
        help="serve /healthz, /readyz, /metrics, /github/webhook and /routines/NAME on this "
        "port (default: none; HTTP mode also serves them on --port)",
    )
    parser.add_argument(
        "--emulator",
        action="store_true",
        help="no Slack workspace needed: run the bot against a local Slack emulator and serve "
        "a page at http://127.0.0.1:PORT/ (--port, default 3000; loopback only) to use it in "
        "a browser: DMs, threads, buttons, the Home tab, /harness commands. Its agents use the "
        "scripted model (offline, costs simulated) unless --real",
    )
    parser.add_argument(
        "--real",
        action="store_true",
        help="with --emulator: the agents use the model the environment names (an API key, "
        "a Claude Code login; it costs money)",
    )
    # A server's log is how its operators follow it: one line per Slack request and per agent
    # start and finish (INFO); the one-shot commands keep to warnings.
    parser.set_defaults(handler=run, log_level=LOG_INFO)


def run(project: Project, args: argparse.Namespace) -> int:
    # Imported here: every `harness` command registers `bot`, only this one needs Slack.
    import asyncio
    import os

    if args.real and not args.emulator:
        from harness.errors import HarnessError

        raise HarnessError(
            "--real is for --emulator",
            fix="add --emulator, or drop --real (`harness bot` always uses the real model)",
        )
    if args.emulator:  # before the tokens: the emulator needs none
        from bot.emulator_run import run_emulator

        return asyncio.run(run_emulator(project, port=args.port, real=args.real))
    from bot.server import serve
    from bot.settings import SlackEnv, check_token_shapes, choose_mode

    env = SlackEnv.from_environ(os.environ)
    check_token_shapes(env)
    mode = choose_mode(env, args.mode)  # a HarnessError here is reported by the harness CLI
    # Where its agents run is checked and connected first: an unreachable one is said at once.
    return asyncio.run(serve(
        project, env=env, mode=mode, port=args.port, host=args.host, health_port=args.health_port
    ))  # fmt: skip
