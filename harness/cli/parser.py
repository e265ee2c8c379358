"""The ``harness`` command line: every command's arguments and help. ``harness/cli/main.py``
dispatches what it parses."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from harness.cli import (
    installed,
    manifest_command,
    memory_commands,
    routines_commands,
    store_commands,
    usage_commands,
)

# Entry points in this group are ``register(subparsers, common_parser)`` functions; the
# parsers they add call ``set_defaults(handler=...)`` with a ``harness.cli.main.CommandHandler``.
COMMAND_GROUP = "harness.commands"
# logging.INFO, for a server's ``log_level`` default: `harness --help` prints without logging.
LOG_INFO = 20


_JSON_HELP = "print one JSON document (for scripts) instead of text"


def build_parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    # SUPPRESS: given before or after the command, the option is kept (not reset to a default).
    common.add_argument(
        "--config",
        type=Path,
        default=argparse.SUPPRESS,
        help="path to config.yaml, or its folder (default: $HARNESS_CONFIG, else ./config.yaml)",
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
        epilog="New here? `harness init` writes a config.yaml and roles/ to start from; "
        '`harness run --scripted "plan: a settings page"` then tries it offline.',
    )
    parser.add_argument("--version", action="version", version=installed.version_line())
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    init = sub.add_parser(
        "init",
        help="write a config.yaml and roles/ to start from",
        description="Write the shipped config.yaml (every setting, commented) and roles/ "
        "(developer, product-analyst, reviewer) into DIR, to edit. Files already there are "
        "never overwritten without --force.",
    )
    init.add_argument("dir", nargs="?", type=Path, default=Path("."), help="where (default .)")
    init.add_argument("--force", action="store_true", help="overwrite those files if there")
    manifest_command.register(sub)

    run = sub.add_parser(
        "run",
        parents=[common],
        help="run one agent from the terminal and print its structured result",
        description="Run one agent. Without --role the routing rules in config.yaml pick "
        "it; with --task the agent joins that task and sees its history first. Agents need a "
        "way to reach a model: ANTHROPIC_API_KEY (or ANTHROPIC_AUTH_TOKEN, "
        "CLAUDE_CODE_OAUTH_TOKEN, a gateway's ANTHROPIC_BASE_URL, a cloud provider's "
        "CLAUDE_CODE_USE_*, a logged-in Claude Code); without one, run stops before creating "
        "a task. --scripted needs none.",
    )
    run.add_argument("prompt", help="what the agent should do")
    run.add_argument("--role", help="the role to run (a file in roles/, without .md)")
    run.add_argument("--task", metavar="SLUG", help="add to this existing task")
    run.add_argument(
        "--model",
        metavar="NAME",
        help="the agent's model: the role's `model`, or one its `models:` list allows "
        "(as `model:NAME` at the start of the prompt)",
    )
    run.add_argument(
        "--plan-first",
        action="store_true",
        help="the agent only reads and its result is a plan (as `plan first:` at the start of "
        "the prompt); run again with --task to implement it",
    )
    run.add_argument(
        "--scripted",
        action="store_true",
        help="try it offline and free: the agents (real Claude Code, on this machine) talk to "
        "the scripted model shipped for demos and tests instead of Claude; an analyst drafts "
        "and awaits a developer, other roles report at once",
    )

    tasks = sub.add_parser(
        "tasks",
        parents=[common],
        help="list tasks (slug, created, status, cost, dispatch count, description)",
        description="List the tasks, newest first: status is running while an agent works "
        "on the task, else how the latest request ended (new: no agent yet); cost is what "
        "its agents reported, in USD (—: none did).",
    )
    show = sub.add_parser(
        "show",
        parents=[common],
        help="show a task: its reconstructed context and every dispatch",
        description="Show a task's reconstructed context and each dispatch with its result.",
    )
    tasks.add_argument("--json", action="store_true", help=_JSON_HELP)
    tasks.add_argument("--routine", metavar="NAME", help="only the tasks this routine started")
    show.add_argument("slug", help="the task's slug (see `harness tasks`)")
    show.add_argument("--json", action="store_true", help=_JSON_HELP)
    pr = sub.add_parser(
        "pr",
        parents=[common],
        help="push a task's branch and open (or update) its pull request",
        description="Push the task's branch (harness/<slug>) to its repository's remote with "
        "the harness's own credentials (the token in $GITHUB_TOKEN, or the variable the "
        "repository's github.tokenEnv names, or its GitHub App), then open its pull "
        "request, or update the open one, titled and "
        "described from the task's results. Prints the pull request's number and URL, its "
        "branch and who it was opened as. The task's repository needs `github: OWNER/NAME` "
        "in config.yaml. Exits 1 when pushing or GitHub refused, saying the fix; running it "
        "again picks up from what was done.",
    )
    pr.add_argument("slug", help="the task's slug (see `harness tasks`)")
    pr.add_argument("--json", action="store_true", help=_JSON_HELP)
    rm = sub.add_parser(
        "rm",
        parents=[common],
        help="delete a task: its task.json, journals, diffs and audit log",
        description="Delete a task's folder after asking (--yes: do not ask). A task an "
        "agent is queued or running on is refused without --force. The task's workspace "
        "and git branch are kept (`harness workspaces prune` removes idle workspaces).",
    )
    rm.add_argument("slug", help="the task's slug (see `harness tasks`)")
    rm.add_argument("-y", "--yes", action="store_true", help="do not ask for a confirmation")
    rm.add_argument(
        "--force",
        action="store_true",
        help="delete it even while an agent works on it, or when its task.json cannot be read",
    )
    prune_tasks = sub.add_parser(
        "prune-tasks",
        parents=[common],
        help="delete the tasks idle longer than pruneTasksAfterDays (retention)",
        description="Delete every task idle (nothing started, ended or decided on it) for "
        "longer than config.yaml's pruneTasksAfterDays, or --days; tasks with an agent at "
        "work are kept. Says which, then asks (--yes: do not ask; for cron). Workspaces are "
        "kept. With pruneTasksAfterDays null (the default) and no --days, tasks are kept "
        "forever.",
    )
    prune_tasks.add_argument("--days", type=float, help="idle for longer than this many days")
    prune_tasks.add_argument("-y", "--yes", action="store_true", help="do not ask first")
    prune_tasks.add_argument(
        "--dry-run", action="store_true", help="only list what would be deleted"
    )
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
    audit.add_argument("--json", action="store_true", help=_JSON_HELP)
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
    workspaces.add_argument("--json", action="store_true", help="list: " + _JSON_HELP)
    workspaces.add_argument(
        "--dry-run",
        action="store_true",
        help="prune: only list what would be removed and kept, and why; change nothing",
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
        default=None,  # <host>-<pid>, made by the worker (socket waits for the command)
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
    worker.add_argument(
        "--health-port",
        type=int,
        metavar="N",
        help="serve /healthz, /readyz (NATS connected) and /metrics on this port (default: none)",
    )
    worker.set_defaults(log_level=LOG_INFO)
    doctor = sub.add_parser(
        "doctor",
        parents=[common],
        help="check this set-up: config, repositories, model, git, sandbox, and what it uses",
        description="Check config.yaml, its roles and repository paths, model access, git, "
        "the OS sandbox and free disk space, and what the set-up uses: Slack (tokens, "
        "scopes, connection mode) when a SLACK_* variable is set or with --slack, GitHub (each "
        "repository's token, access, the webhook secret for `on: github` routines), the MCP "
        "HTTP server's tokens, NATS (runtime: nats). One line each: ✓, - (not used here), ! "
        "(a warning) or ✗ with a fix. Exits 1 on any ✗. On a worker's machine "
        "($HARNESS_NATS_URL set, no config.yaml) it checks what `harness worker` needs: model "
        "access, git, the sandbox, the NATS server, disk space.",
    )
    doctor.add_argument(
        "--slack",
        action="store_true",
        help="check the Slack set-up even where no SLACK_* variable is set",
    )
    routines_commands.register(sub, common)
    memory_commands.register(sub, common)
    store_commands.register(sub, common)
    usage_commands.register(sub, common)
    # By name: a venv that still holds an older install under another distribution name
    # lists each entry point twice.
    extensions = dict(installed.entry_points(COMMAND_GROUP))
    for value in extensions.values():
        # Front ends (the Slack bot) add their own commands; harness never imports them.
        installed.load(value)(sub, common)
    return parser
