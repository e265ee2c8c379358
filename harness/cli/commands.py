"""The commands that open the harness (``run``, ``show``, ``pr``, ``rm``,
``prune-tasks``, ``repair``, ``audit``, ``workspaces``): each opens it for its purpose, does
its work through the orchestrator's services and shuts it down. Imported only when one of
them runs, so ``harness --help``, ``init`` or ``doctor`` never load the agents' stack."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import sys
from collections.abc import Awaitable
from datetime import timedelta
from typing import TypeVar

from harness.agents.directives import parse_directives
from harness.agents.events import AgentEvent
from harness.agents.orchestrator import Orchestrator
from harness.cli import offline, task_commands
from harness.cli.render import (
    render_audit,
    render_audit_json,
    render_prune,
    render_pull_request,
    render_pull_request_json,
    render_record,
    render_repair,
    render_task,
    render_task_json,
    render_workspaces,
    render_workspaces_json,
)
from harness.cli.terminal import TerminalChannel, confirm, terminal_user
from harness.errors import ForgeError, HarnessError, UnknownRoleError
from harness.opening import Purpose, open_harness
from harness.project import Project
from harness.stop_signals import StopSignals

EXIT_FAILED = 1
EXIT_INTERRUPTED = 130

# (``tasks`` only reads the store: ``harness/cli/task_list.py``, no orchestrator.)
COMMANDS = (
    "run", "show", "pr", "rm", "prune-tasks", "repair", "audit", "workspaces",
)  # fmt: skip

T = TypeVar("T")


async def run_command(project: Project, args: argparse.Namespace) -> int:
    """Opens the harness for ``args.command`` (one of ``COMMANDS``) and runs it."""
    scripted = args.command == "run" and args.scripted
    if args.command == "run" and args.role is not None and args.role not in project.roles:
        # Said before the harness opens: a mistyped role costs no SDK import or model check.
        raise UnknownRoleError(args.role, list(project.roles))
    if scripted:
        print(f"harness: {offline.SCRIPTED_NOTE}", file=sys.stderr)
    said: list[str] = []

    def say(line: str) -> None:
        said.append(line)
        print(f"harness: {line}", file=sys.stderr, flush=True)

    # `run` checks and connects where its agents run before a task is made: what is missing
    # is said at once (within a few seconds), and SIGTERM or Ctrl-C meanwhile ends it.
    purpose: Purpose = "run" if args.command == "run" else "read"
    async with contextlib.AsyncExitStack() as stack:
        opening = open_harness(project, purpose=purpose, scripted=scripted, say=say)
        harness = await _interruptible(stack.enter_async_context(opening))
        if harness is None:
            doing = f" while {said[-1]}" if said else ""
            print(f"harness: interrupted{doing}; nothing was started", file=sys.stderr)
            return EXIT_INTERRUPTED
        return await _on(harness.orchestrator, args)


async def _interruptible(operation: Awaitable[T]) -> T | None:
    """Runs ``operation`` to its end, unless SIGINT or SIGTERM comes first: then it is
    cancelled (None)."""
    task = asyncio.current_task()
    assert task is not None
    with StopSignals(then=task.cancel).caught() as signals:
        try:
            return await operation
        except asyncio.CancelledError:
            if not signals.received:
                raise
            while task.cancelling():  # the cancellations were ours, and are handled
                task.uncancel()
            return None


async def _on(orchestrator: Orchestrator, args: argparse.Namespace) -> int:
    try:
        if args.command == "run":
            return await _run(orchestrator, args.prompt, args.role, args.task,
                              model=args.model, plan=args.plan_first)  # fmt: skip
        if args.command in ("rm", "prune-tasks"):  # (False, ...): the person said no
            done, said = await (
                task_commands.remove_task(
                    orchestrator, args.slug, yes=args.yes, force=args.force, confirm=confirm
                )
                if args.command == "rm"
                else task_commands.prune_tasks(
                    orchestrator, args.days, yes=args.yes, dry_run=args.dry_run, confirm=confirm
                )
            )
            print(said)
            return 0 if done else EXIT_FAILED
        as_json = getattr(args, "json", False)
        if args.command == "show":
            task = await orchestrator.tasks.task(args.slug)
            context = await orchestrator.tasks.task_context(args.slug)
            audit = await orchestrator.tasks.audit_log(args.slug)
            print((render_task_json if as_json else render_task)(task, context, audit))
        elif args.command == "pr":
            return await _pull_request(orchestrator, args.slug, as_json=as_json)
        elif args.command == "repair":
            print(render_repair(await orchestrator.tasks.repair_task(args.slug)))
        elif args.command == "audit":
            await orchestrator.tasks.task(args.slug)
            entries = await orchestrator.tasks.audit_log(args.slug)
            print(render_audit_json(args.slug, entries) if as_json else render_audit(entries))
        elif args.action == "list":
            workspaces = await orchestrator.tasks.workspaces()
            print(render_workspaces_json(workspaces) if as_json else render_workspaces(workspaces))
        else:
            older = timedelta(days=args.days) if args.days is not None else None
            report = await orchestrator.tasks.prune_workspaces(older, dry_run=args.dry_run)
            print(render_prune(report))
        return 0
    finally:
        await orchestrator.shutdown()


async def _pull_request(orchestrator: Orchestrator, slug: str, *, as_json: bool) -> int:
    """``harness pr``: as the terminal's own user, who may (``by=None``). A refusal of the
    push or of GitHub is a failed command (1), not a usage error."""
    try:
        pull = await orchestrator.pull_requests.open_pull_request(slug, by=None)
    except ForgeError as exc:
        if exc.failure == "no-branch":  # the terminal's way to a task with a branch
            exc.fix = (
                'start the work as a task on a repository: `harness run "repo:NAME ..."` (NAME '
                "from `workspaces.repositories` in config.yaml), then `harness pr` its slug"
            )
        print(f"harness: {exc}", file=sys.stderr)
        return EXIT_FAILED
    print(render_pull_request_json(slug, pull) if as_json else render_pull_request(pull))
    return 0


async def _run(
    orchestrator: Orchestrator,
    prompt: str,
    role: str | None,
    slug: str | None,
    *,
    model: str | None = None,
    plan: bool = False,
) -> int:
    # `plan first:` and `model:NAME` at the start of the prompt, as in Slack.
    directives, prompt = parse_directives(prompt)
    model, plan = model or directives.model, plan or directives.plan_first
    repository = None
    if slug is None:  # a new task: which repository it is about (``repo:NAME``, the default)
        choice = orchestrator.tasks.choose_repository(prompt)
        problem = choice.explain()
        if problem is not None:
            raise HarnessError(problem, fix="name the repository in the request: repo:NAME")
        prompt, repository = choice.text, choice.repository
        role = role or orchestrator.route(prompt)
        await orchestrator.start_ahead(role, repository)  # its CLI starts while the task is made
    await orchestrator.recover_interrupted()
    if role is None:
        task = await orchestrator.tasks.task(slug) if slug else None
        role = orchestrator.route_follow_up(task, prompt) if task else orchestrator.route(prompt)
    planner = orchestrator.role(role)  # unknown role: fail before creating a task
    # A role's planFirst plans a new task; a run with --task implements (or asks again).
    plan = plan or (slug is None and planner.plan_first)
    orchestrator.subscribe(_progress_on_stderr)
    orchestrator.humans.add_human_channel(TerminalChannel(orchestrator.humans.answer_question))
    with _stopping_agents(orchestrator).caught():
        handle = await orchestrator.draft(
            role, prompt, task_slug=slug, repository=repository, requested_by=terminal_user(),
            model=model, plan=plan,
        )  # fmt: skip
        record = await orchestrator.wait(handle.agent_id)
    print(render_record(record, task_slug=handle.task_slug))
    if record.plan and record.status == "completed":
        print(f"To implement this plan: harness run --task {handle.task_slug} --role {role} "
              '"implement the plan"')  # fmt: skip
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


def _stopping_agents(orchestrator: Orchestrator) -> StopSignals:
    """SIGINT/SIGTERM stop every agent (dispatches end ``interrupted``), never orphan them."""
    pending: list[asyncio.Task[None]] = []

    def stop_agents() -> None:
        name = signals.received[-1]
        print(f"harness: {name} received, stopping agents…", file=sys.stderr)
        shutdown = orchestrator.shutdown(f"interrupted by {name}")
        pending.append(asyncio.get_running_loop().create_task(shutdown))

    signals = StopSignals(then=stop_agents)
    return signals
