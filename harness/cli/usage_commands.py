"""``harness usage [--by person|channel|role|routine|repository|day|task] [--since DATE]
[--json]``: what the agents spent, read straight from the task store's index (no agent, no
orchestrator), grouped one way. The totals are what the model billed: the sum of the paid
agents' costs (a scripted model's simulated costs are left out); days are UTC."""

from __future__ import annotations

import argparse
import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from harness.project import Project

_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")
BY = ("person", "channel", "role", "routine", "repository", "day", "task")


def register(
    subparsers: argparse._SubParsersAction[argparse.ArgumentParser],
    common: argparse.ArgumentParser,
) -> None:
    parser = subparsers.add_parser(
        "usage",
        parents=[common],
        help="what the agents spent, by person, channel, role, routine, repository or day",
        description="What the agents spent since a UTC day (default: the first of this UTC "
        "month), grouped by person (who asked; an agent another drafted counts to the task's "
        "requester), channel (direct messages together), role, routine, repository, day (the "
        "UTC day each agent started) or task. Costs a scripted model reported are left out: "
        "the total is what the model billed.",
    )
    parser.add_argument("--by", choices=BY, default="person", help="how to group (default person)")
    parser.add_argument("--since", metavar="DATE", help="a UTC day, YYYY-MM-DD")
    parser.add_argument("--json", action="store_true", help="print one JSON document")
    parser.set_defaults(handler=main)


def main(project: Project, args: argparse.Namespace) -> int:
    # Imported here, not at the top: every command's parser imports this module.
    import asyncio

    return asyncio.run(_main(project, args))


async def _main(project: Project, args: argparse.Namespace) -> int:
    import json

    from harness.clock import SYSTEM
    from harness.errors import HarnessError
    from harness.project import task_store
    from harness.tasks.usage import render_usage, usage_json

    since = args.since
    if since is None:
        since = SYSTEM.now().strftime("%Y-%m-01")
    elif not _DATE.match(since) or not _is_date(since):
        raise HarnessError(f"--since {since!r} is not a date", fix="write it as YYYY-MM-DD")
    store = task_store(project.config)
    try:
        rows = await store.spending(since)
    finally:
        await store.close()
    if args.json:
        print(json.dumps(usage_json(rows, args.by, since), indent=2, ensure_ascii=False))
    else:
        print(render_usage(rows, args.by, since))
    return 0


def _is_date(text: str) -> bool:
    from datetime import date

    try:
        date.fromisoformat(text)
    except ValueError:
        return False
    return True
