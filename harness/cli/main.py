"""The terminal front end: ``harness init | run | tasks | show | pr | rm | repair | bot | ...``.
A thin parser and dispatcher: each command's module is imported when it runs, so a command
loads only what it uses (``harness --help`` no agent, ``harness worker`` no orchestrator)."""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from harness.cli.parser import build_parser
from harness.errors import HarnessError

if TYPE_CHECKING:
    from harness.project import Project

logger = logging.getLogger(__name__)

# What the parsers that front ends add (``harness.cli.parser.COMMAND_GROUP``) set as their
# handler.
CommandHandler = Callable[["Project", argparse.Namespace], int]

EXIT_USAGE = 2


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:  # bare `harness`: what it can do
        parser.print_help()
        return 0
    configure_logging(
        verbose=getattr(args, "verbose", False),
        log_file=getattr(args, "log_file", None),
        level=getattr(args, "log_level", logging.WARNING),
    )
    # Imported once the command is known: config.yaml's schema and the event loop are not
    # needed for `--help` or `--version`.
    import asyncio

    from harness.project import default_config_path, load_project

    config_path: Path = getattr(args, "config", None) or default_config_path()
    try:
        if args.command == "worker":  # a worker machine needs no config.yaml
            return asyncio.run(_worker(args))
        if args.command == "doctor":  # says what is wrong with config.yaml, not raising
            from harness.cli import doctor

            return doctor.main(args)
        if args.command == "init":
            from harness.cli import scaffold

            report = scaffold.init_project(args.dir, force=args.force)
            print(scaffold.render_init(report, cwd=Path.cwd()))
            return 0
        if args.command == "workspaces" and args.action == "prune" and args.json:
            raise HarnessError(
                "--json is for `harness workspaces list`",
                fix="run `harness workspaces prune` without --json",
            )
        project = load_project(config_path)
        if args.command == "tasks":  # a listing reads the store: no orchestrator to open
            from harness.cli.task_list import list_tasks

            print(asyncio.run(list_tasks(project, as_json=args.json)))
            return 0
        # Loaded here, not at the top: a command that opens no harness never loads its stack.
        from harness.cli import commands

        if args.command in commands.COMMANDS:
            return asyncio.run(commands.run_command(project, args))
        handler: CommandHandler = args.handler
        return handler(project, args)
    except HarnessError as exc:
        print(f"harness: {exc}", file=sys.stderr)
        return EXIT_USAGE


# Libraries whose debug lines are request dumps, not the harness's story.
_QUIET_LOGGERS = ("slack_sdk", "slack_bolt", "aiohttp", "asyncio", "mcp", "claude_agent_sdk")


def configure_logging(*, verbose: bool, log_file: Path | None, level: int) -> None:
    """``level`` for everyone (commands pick their own: INFO for a server, WARNING for a
    one-shot command); ``-v`` turns on debug lines of the harness's own loggers only."""
    handler: logging.Handler = (
        logging.FileHandler(log_file, encoding="utf-8") if log_file else logging.StreamHandler()
    )
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(logging.DEBUG if verbose else level)
    for name in _QUIET_LOGGERS:
        logging.getLogger(name).setLevel(max(level, logging.INFO))


async def _worker(args: argparse.Namespace) -> int:
    import asyncio
    import signal

    from harness.runtime.claude import ClaudeRuntime
    from harness.runtime.nats_link import NatsSettings, require_nats
    from harness.runtime.worker import Worker

    if not args.nats:
        raise HarnessError(
            "no NATS server named", fix="pass --nats nats://HOST:4222 or set HARNESS_NATS_URL"
        )
    require_nats()
    if args.slots < 1:
        raise HarnessError(f"--slots {args.slots}: at least 1", fix="pass --slots 1 or more")
    settings = NatsSettings(args.nats, args.credentials, args.tls_ca, args.prefix)
    worker = Worker(
        settings,
        ClaudeRuntime(),
        name=args.name,
        slots=args.slots,
        workspaces=args.workspaces.absolute(),
        health_port=args.health_port,
    )
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
    print(f"harness worker {args.name}: connecting to {args.nats}", file=sys.stderr, flush=True)
    await worker.serve(stop, ready=lambda: print(
        f"harness worker {args.name}: ready, {args.slots} slot(s)", file=sys.stderr, flush=True
    ), waiting=lambda what: print(
        f"harness worker {args.name}: {what}", file=sys.stderr, flush=True
    ))  # fmt: skip
    print(f"harness worker {args.name}: stopped", file=sys.stderr, flush=True)
    return 0
