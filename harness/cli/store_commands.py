"""``harness store migrate --to nats|file``: copies every task (record, logs, text files) from
the tasks folder to the NATS store config.yaml names, or back; each task read back and
compared; the source never changed, so a copy cut short loses nothing and a second run
finishes it (``harness/tasks/nats_migrate.py``). Then set ``store.kind`` to the new side."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from harness.project import Project
    from harness.tasks.nats_migrate import Migration


def register(
    subparsers: argparse._SubParsersAction[argparse.ArgumentParser],
    common: argparse.ArgumentParser,
) -> None:
    parser = subparsers.add_parser(
        "store",
        parents=[common],
        help="copy every task between the tasks folder and the NATS store",
        description="`migrate --to nats` copies every task of the tasks folder (its record, "
        "logs and text files) to the NATS server of `store.url` (or `runtime.url`); "
        "`--to file` copies them back. Each task is read back and compared; the source is "
        "never changed, so running it again after an interruption finishes the copy and skips "
        "what is already there. Stop the bot first; afterwards set `store.kind` in config.yaml. "
        "The other state in the tasks folder (the bot's ledger, routines, reviews) stays there.",
    )
    parser.add_argument("action", choices=("migrate",))
    parser.add_argument("--to", required=True, choices=("nats", "file"), dest="to")
    parser.set_defaults(handler=main)


def main(project: Project, args: argparse.Namespace) -> int:
    import asyncio

    done = asyncio.run(migrate(project, to=args.to, say=print))
    print(render(done))
    return 0 if done.ok else 1


async def migrate(project: Project, *, to: str, say: Callable[[str], None] = print) -> Migration:
    """The copy config.yaml's stores make, ``to`` one of ``nats``, ``file``."""
    from harness.errors import HarnessError
    from harness.tasks.nats_migrate import FolderSide, NatsSide
    from harness.tasks.nats_migrate import migrate as copy
    from harness.tasks.nats_store import NatsTaskStore

    config = project.config
    if config.store.url is None:
        raise HarnessError(
            f"{config.file}: no NATS server to copy {'to' if to == 'nats' else 'from'}",
            fix="set `store.url` (or `runtime.url`) to the server, e.g. nats://127.0.0.1:4222",
        )
    store = NatsTaskStore(config.store)
    folder, nats = FolderSide(config.tasks_dir), NatsSide(store)
    source, dest = (folder, nats) if to == "nats" else (nats, folder)
    try:
        return await copy(source, dest, say)
    finally:
        await store.close()


def render(done: Migration) -> str:
    lines = [
        f"{len(done.copied)} task(s) copied, {len(done.already)} already there "
        f"(checked), {len(done.conflicts)} left (another task of that name there), "
        f"{len(done.failed)} unequal when read back."
    ]
    if done.conflicts:
        lines.append(f"Left: {', '.join(done.conflicts)}: rename or remove them there first.")
    if done.failed:
        lines.append(f"Unequal: {', '.join(done.failed)}: run the migration again.")
    return "\n".join(lines)
