"""The terminal front end: ``harness run | tasks | show | repair | bot``. Thin over the
orchestrator."""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import signal
import socket
import sys
from collections.abc import Callable, Sequence
from datetime import timedelta
from importlib.metadata import entry_points
from pathlib import Path

from harness.errors import HarnessError
from harness.events import AgentEvent
from harness.orchestrator import Orchestrator
from harness.project import Project, build_orchestrator, default_config_path, load_project
from harness.render import (
    render_audit,
    render_prune,
    render_record,
    render_repair,
    render_task,
    render_task_list,
    render_workspaces,
)
from harness.terminal import TerminalChannel

logger = logging.getLogger(__name__)

# Entry points in this group are ``register(subparsers, common_parser)`` functions; the
# parsers they add call ``set_defaults(handler=...)`` with a CommandHandler.
COMMAND_GROUP = "harness.commands"
CommandHandler = Callable[[Project, argparse.Namespace], int]

EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130


def build_parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    # SUPPRESS: given before or after the command, the option is kept (not reset to a default).
    common.add_argument(
        "--config",
        type=Path,
        default=argparse.SUPPRESS,
        help="path to config.yaml (default: $HARNESS_CONFIG, else ./config.yaml)",
    )
    common.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        default=argparse.SUPPRESS,
        help="log the harness's debug details (the Slack SDK's request dumps stay out)",
    )
    common.add_argument(
        "--log-file",
        type=Path,
        default=argparse.SUPPRESS,
        metavar="PATH",
        help="append the log to this file instead of standard error",
    )

    parser = argparse.ArgumentParser(
        prog="harness",
        description="Turn requests into tasks worked by teams of Claude agents.",
        parents=[common],
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    run = sub.add_parser(
        "run",
        parents=[common],
        help="run one agent from the terminal and print its structured result",
        description="Run one agent. Without --role the routing rules in config.yaml pick "
        "it; with --task the agent joins that task and sees its history first.",
    )
    run.add_argument("prompt", help="what the agent should do")
    run.add_argument("--role", help="the role to run (a file in roles/, without .md)")
    run.add_argument("--task", metavar="SLUG", help="add to this existing task")

    sub.add_parser(
        "tasks",
        parents=[common],
        help="list tasks (slug, created, dispatch count, description)",
        description="List the tasks, newest first.",
    )
    show = sub.add_parser(
        "show",
        parents=[common],
        help="show a task: its reconstructed context and every dispatch",
        description="Show a task's reconstructed context and each dispatch with its result.",
    )
    show.add_argument("slug", help="the task's slug (see `harness tasks`)")
    repair = sub.add_parser(
        "repair",
        parents=[common],
        help="repair a task whose task.json cannot be read",
        description="Keep the damaged task.json as task.json.damaged-<UTC time> (never "
        "deleted) and write a fresh task.json with everything of it that still reads: the "
        "task's date, description, Slack thread and repository, and each dispatch record and "
        "decision that still validates. Says what it kept and what it dropped. A task that "
        "reads fine is left alone.",
    )
    repair.add_argument("slug", help="the task's slug (see `harness tasks`)")
    audit = sub.add_parser(
        "audit",
        parents=[common],
        help="print a task's audit log of harness tool calls",
        description="Every harness MCP tool call made on a task, refused ones included: "
        "time, caller, tool, outcome or error code, duration, input.",
    )
    audit.add_argument("slug", help="the task's slug (see `harness tasks`)")
    workspaces = sub.add_parser(
        "workspaces",
        parents=[common],
        help="list the tasks' workspaces, or prune the idle ones",
        description="Each task works in its own folder: a git worktree on branch "
        "harness/<slug> of a repository named in config.yaml, or a scratch folder. `prune` "
        "removes those of tasks idle longer than workspaces.pruneAfterDays (or --days); "
        "uncommitted work is saved to a patch file first, and branches are kept.",
    )
    workspaces.add_argument("action", choices=("list", "prune"), help="what to do")
    workspaces.add_argument(
        "--days", type=float, help="prune: idle for longer than this many days (default: config)"
    )
    worker = sub.add_parser(
        "worker",
        parents=[common],
        help="run agents for a harness on this machine, taken from a NATS server",
        description="Take agent runs from the harness's JetStream work queue on a NATS server "
        "(at most --slots at once), run each with the Claude Code CLI in a folder of its "
        "task's under --workspaces, and report back. Needs no config.yaml and no Slack "
        "token. The harness sends agents here when its config.yaml says `runtime: {kind: "
        "nats, url: ...}`. SIGTERM or Ctrl-C stops the agents it runs (they end interrupted).",
    )
    worker.add_argument(
        "--nats",
        default=os.environ.get("HARNESS_NATS_URL"),
        metavar="URL",
        help="the NATS server (default: $HARNESS_NATS_URL), e.g. nats://10.0.0.5:4222",
    )
    worker.add_argument("--slots", type=int, default=4, help="agents run at once (default 4)")
    worker.add_argument(
        "--name",
        default=f"{socket.gethostname()}-{os.getpid()}",
        help="how the harness names this worker (default: <host>-<pid>)",
    )
    worker.add_argument(
        "--workspaces",
        type=Path,
        default=Path(".agents/worker-workspaces"),
        metavar="DIR",
        help="where each task gets its folder (default .agents/worker-workspaces)",
    )
    worker.add_argument("--credentials", type=Path, metavar="FILE", help="a NATS .creds file")
    worker.add_argument("--tls-ca", type=Path, metavar="FILE", help="the CA of the server's cert")
    worker.add_argument(
        "--prefix", default="harness", help="the harness's subject prefix (default harness)"
    )
    worker.set_defaults(log_level=logging.INFO)
    for extension in entry_points(group=COMMAND_GROUP):
        # Front ends (the Slack bot) add their own commands; harness never imports them.
        extension.load()(sub, common)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    configure_logging(
        verbose=getattr(args, "verbose", False),
        log_file=getattr(args, "log_file", None),
        level=getattr(args, "log_level", logging.WARNING),
    )
    config_path: Path = getattr(args, "config", None) or default_config_path()
    try:
        if args.command == "worker":  # a worker machine needs no config.yaml
            return asyncio.run(_worker(args))
        project = load_project(config_path)
        if args.command in ("run", "tasks", "show", "repair", "audit", "workspaces"):
            return asyncio.run(_command(project, args))
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


async def _command(project: Project, args: argparse.Namespace) -> int:
    orchestrator = build_orchestrator(project)
    try:
        if args.command == "run":
            return await _run(orchestrator, args.prompt, args.role, args.task)
        if args.command == "tasks":
            tasks = await orchestrator.task_summaries()
            print(render_task_list(tasks, await orchestrator.damaged_tasks()))
        elif args.command == "show":
            task = await orchestrator.task(args.slug)
            context = await orchestrator.task_context(args.slug)
            print(render_task(task, context, await orchestrator.audit_log(args.slug)))
        elif args.command == "repair":
            print(render_repair(await orchestrator.repair_task(args.slug)))
        elif args.command == "audit":
            await orchestrator.task(args.slug)
            print(render_audit(await orchestrator.audit_log(args.slug)))
        elif args.action == "list":
            print(render_workspaces(await orchestrator.workspaces()))
        else:
            older = timedelta(days=args.days) if args.days is not None else None
            print(render_prune(await orchestrator.prune_workspaces(older)))
        return 0
    finally:
        await orchestrator.shutdown()


async def _worker(args: argparse.Namespace) -> int:
    from harness.nats_link import NatsSettings
    from harness.runtime import ClaudeRuntime
    from harness.worker import Worker

    if not args.nats:
        raise HarnessError(
            "no NATS server named", fix="pass --nats nats://HOST:4222 or set HARNESS_NATS_URL"
        )
    if args.slots < 1:
        raise HarnessError(f"--slots {args.slots}: at least 1", fix="pass --slots 1 or more")
    settings = NatsSettings(args.nats, args.credentials, args.tls_ca, args.prefix)
    worker = Worker(
        settings,
        ClaudeRuntime(),
        name=args.name,
        slots=args.slots,
        workspaces=args.workspaces.absolute(),
    )
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
    print(f"harness worker {args.name}: connecting to {args.nats}", file=sys.stderr, flush=True)
    await worker.serve(stop, ready=lambda: print(
        f"harness worker {args.name}: ready, {args.slots} slot(s)", file=sys.stderr, flush=True
    ))  # fmt: skip
    print(f"harness worker {args.name}: stopped", file=sys.stderr, flush=True)
    return 0


async def _run(orchestrator: Orchestrator, prompt: str, role: str | None, slug: str | None) -> int:
    await orchestrator.recover_interrupted()
    repository = None
    if slug is None:  # a new task: which repository it is about (``repo:NAME``, the default)
        choice = orchestrator.choose_repository(prompt)
        problem = choice.explain()
        if problem is not None:
            raise HarnessError(problem, fix="name the repository in the request: repo:NAME")
        prompt, repository = choice.text, choice.repository
    if role is None:
        task = await orchestrator.task(slug) if slug else None
        role = orchestrator.route_follow_up(task, prompt) if task else orchestrator.route(prompt)
    orchestrator.role(role)  # unknown role: fail before creating a task
    orchestrator.subscribe(_progress_on_stderr)
    orchestrator.add_human_channel(TerminalChannel(orchestrator.answer_question))
    stop = _install_signal_handlers(orchestrator)
    try:
        handle = await orchestrator.draft(role, prompt, task_slug=slug, repository=repository)
        record = await orchestrator.wait(handle.agent_id)
    finally:
        stop()
    print(render_record(record, task_slug=handle.task_slug))
    if record.status == "completed":
        return 0
    return EXIT_INTERRUPTED if record.status == "interrupted" else EXIT_FAILED


def _progress_on_stderr(event: AgentEvent) -> None:
    r = event.record
    if event.kind == "started":
        print(f"[{r.agent_id}] {r.role} started on task {event.task.slug}", file=sys.stderr)
    elif event.kind == "progress" and r.progress is not None:
        percent = f" {r.progress.percent:g}%" if r.progress.percent is not None else ""
        print(f"[{r.agent_id}]{percent} {r.progress.message}", file=sys.stderr)
    elif event.kind == "finished":
        print(f"[{r.agent_id}] {r.role} {r.status}", file=sys.stderr)


def _install_signal_handlers(orchestrator: Orchestrator) -> Callable[[], None]:
    """SIGINT/SIGTERM stop every agent (dispatches end ``interrupted``), never orphan them."""
    loop = asyncio.get_running_loop()
    pending: list[asyncio.Task[None]] = []

    def on_signal(signum: int) -> None:
        name = signal.Signals(signum).name
        print(f"harness: {name} received, stopping agents…", file=sys.stderr)
        pending.append(loop.create_task(orchestrator.shutdown(f"interrupted by {name}")))

    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, on_signal, signum)

    def remove() -> None:
        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(signum)

    return remove
