"""The terminal front end: ``harness init | run | tasks | show | pr | rm | repair | bot | ...``.
A thin parser and dispatcher: each command's module is imported when it runs, so a command
loads only what it uses (``harness --help`` no agent, ``harness worker`` no orchestrator)."""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from harness.errors import HarnessError

if TYPE_CHECKING:  # `harness --version` prints without argparse
    import argparse

    from harness.project import Project

# What the parsers that front ends add (``harness.cli.parser.COMMAND_GROUP``) set as their
# handler.
CommandHandler = Callable[["Project", "argparse.Namespace"], int]

EXIT_USAGE = 2


# What a shell reports for a program a closed pipe ended (128 + SIGPIPE), as `yes | head`.
EXIT_PIPE_CLOSED = 141


def main(argv: Sequence[str] | None = None) -> int:
    """The command, ended quietly when its output's reader goes first (`harness tasks | head`):
    no BrokenPipeError traceback, as Unix tools end."""
    _exit_untraced()
    try:
        code = _main(argv)
        sys.stdout.flush()  # a reader gone shows here, not as a traceback at exit
    except BrokenPipeError:
        import os

        # The interpreter flushes stdout again as it exits: into /dev/null, not the pipe.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
        return EXIT_PIPE_CLOSED
    return code


def _exit_untraced() -> None:
    """At the process's exit, the garbage collector is kept from tracing what is left (what
    the Claude SDK, pydantic and the harness made: about 0.25 s of a command's end) only to
    free memory that the process's end gives back anyway. Exit handlers still run, output is
    still flushed, files the harness writes are closed where they are written. Once per
    process (``main`` runs more than once inside tests)."""
    import atexit
    import gc

    atexit.unregister(gc.freeze)  # one registration, however often ``main`` runs
    atexit.register(gc.freeze)


def _main(argv: Sequence[str] | None) -> int:
    if list(sys.argv[1:] if argv is None else argv) == ["--version"]:
        from harness.cli.installed import version_line

        # What argparse's version action prints, without building the parser: no command's
        # module is imported, no plug-in looked up.
        print(version_line())
        return 0
    from harness.cli.parser import build_parser

    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:  # bare `harness`: what it can do
        parser.print_help()
        return 0
    import logging  # here, not at the top: `harness --version` prints without it

    configure_logging(
        verbose=getattr(args, "verbose", False),
        log_file=getattr(args, "log_file", None),
        level=getattr(args, "log_level", logging.WARNING),
    )
    # Imported once the command is known: config.yaml's schema and the event loop are not
    # needed for `--help` or `--version` (nor the event loop for a listing).
    from harness.config_file import default_config_path

    config_path: Path = getattr(args, "config", None) or default_config_path()
    try:
        if args.command == "worker":  # a worker machine needs no config.yaml
            import asyncio

            return asyncio.run(_worker(args))
        if args.command == "doctor":  # says what is wrong with config.yaml, not raising
            from harness.cli import doctor

            return doctor.main(args)
        if args.command == "manifest":  # no config.yaml needed: for a pip install's Slack app
            from harness.cli.manifest_command import print_manifest

            return print_manifest()
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
        if args.command == "tasks":  # a listing reads the store: no orchestrator to open
            return _list_tasks(config_path, args)
        from harness.project import load_project

        project = load_project(config_path)
        # A command with a module of its own loads what it uses (`harness usage`, `memory`
        # and `store` open no harness, so never its stack).
        handler: CommandHandler | None = getattr(args, "handler", None)
        if handler is not None:
            return handler(project, args)
        # Loaded here, not at the top: a command that opens no harness never loads its stack.
        import asyncio

        from harness.cli import commands

        return asyncio.run(commands.run_command(project, args))
    except HarnessError as exc:
        print(f"harness: {exc}", file=sys.stderr)
        return EXIT_USAGE


def _list_tasks(config_path: Path, args: argparse.Namespace) -> int:
    """``harness tasks``: with config.yaml unchanged since a clean load, its remembered tasks
    folder and admins, without importing or running config.yaml's schema
    (``harness/cli/listing_cache.py``)."""
    from harness.cli import listing_cache
    from harness.cli.task_list import list_folder, list_folder_now, list_tasks

    # `-v` asks for the load's details (what config.yaml and roles/ were read as): in full.
    read = None if getattr(args, "verbose", False) else listing_cache.read_config(config_path)
    remembered = listing_cache.cached(read) if read is not None else None
    if remembered is not None and args.routine is None:
        text = list_folder_now(remembered.tasks_dir, remembered.admins, as_json=args.json)
        if text is not None:
            print(text)
            return 0
    import asyncio

    if remembered is not None:
        listing = list_folder(
            remembered.tasks_dir, remembered.admins, as_json=args.json, routine=args.routine
        )
    else:
        project = listing_cache.load_listing_project(config_path)
        listing = list_tasks(project, as_json=args.json, routine=args.routine)
    print(asyncio.run(listing))
    return 0


# Libraries whose debug lines are request dumps, not the harness's story.
_QUIET_LOGGERS = ("slack_sdk", "slack_bolt", "aiohttp", "asyncio", "mcp", "claude_agent_sdk")


def configure_logging(*, verbose: bool, log_file: Path | None, level: int) -> None:
    """``level`` for everyone (commands pick their own: INFO for a server, WARNING for a
    one-shot command); ``-v`` turns on debug lines of the harness's own loggers only."""
    import logging

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
    import os
    import socket

    from harness.runtime.claude import ClaudeRuntime
    from harness.runtime.nats_link import NatsSettings, require_nats
    from harness.runtime.worker import Worker
    from harness.stop_signals import StopSignals

    if not args.nats:
        raise HarnessError(
            "no NATS server named", fix="pass --nats nats://HOST:4222 or set HARNESS_NATS_URL"
        )
    require_nats()
    if args.slots < 1:
        raise HarnessError(f"--slots {args.slots}: at least 1", fix="pass --slots 1 or more")
    settings = NatsSettings(args.nats, args.credentials, args.tls_ca, args.prefix)
    if args.name is None:
        args.name = f"{socket.gethostname()}-{os.getpid()}"
    worker = Worker(
        settings,
        ClaudeRuntime(),
        name=args.name,
        slots=args.slots,
        workspaces=args.workspaces.absolute(),
        health_port=args.health_port,
    )
    print(f"harness worker {args.name}: connecting to {args.nats}", file=sys.stderr, flush=True)
    with StopSignals().caught() as signals:
        await worker.serve(signals.stopped, ready=lambda: print(
            f"harness worker {args.name}: ready, {args.slots} slot(s)", file=sys.stderr,
            flush=True,
        ), waiting=lambda what: print(
            f"harness worker {args.name}: {what}", file=sys.stderr, flush=True
        ))  # fmt: skip
    print(f"harness worker {args.name}: stopped", file=sys.stderr, flush=True)
    return 0
