"""``harness store migrate --to nats|file``: copies every task (record, logs, text files) from
the tasks folder to the NATS store config.yaml names, or back; each task read back and
compared; the source never changed, so a copy cut short loses nothing and a second run
finishes it (``harness/tasks/nats_migrate.py``). The team's notes and the bot's ledger (keys
seen, requests taken on, agents watched, what threads are owed) go with them
(``harness/memory/copy.py``, ``harness/tasks/ledger_copy.py``). Then set ``store.kind``."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from harness.memory.copy import NotesCopy
    from harness.project import Project
    from harness.tasks.ledger_copy import LedgerCopy
    from harness.tasks.nats_migrate import Migration


@dataclass(frozen=True)
class Moved:
    tasks: Migration
    notes: NotesCopy
    ledger: LedgerCopy

    @property
    def ok(self) -> bool:
        return self.tasks.ok and not self.notes.unequal


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
        "what is already there. The team's notes and the bot's ledger (keys seen, requests "
        "taken on, agents watched, what threads are owed) are copied too. Stop the bot first; "
        "afterwards set `store.kind` in config.yaml. The routines' and reviews' state stays "
        "in the tasks folder.",
    )
    parser.add_argument("action", choices=("migrate",))
    parser.add_argument("--to", required=True, choices=("nats", "file"), dest="to")
    parser.set_defaults(handler=main)


def main(project: Project, args: argparse.Namespace) -> int:
    import asyncio

    done = asyncio.run(migrate(project, to=args.to, say=print))
    print(render(done))
    return 0 if done.ok else 1


async def migrate(project: Project, *, to: str, say: Callable[[str], None] = print) -> Moved:
    """The copy config.yaml's stores make, ``to`` one of ``nats``, ``file``: the tasks, then
    the notes and the ledger."""
    from harness.errors import HarnessError
    from harness.memory.copy import copy_notes
    from harness.memory.nats_store import NatsMemoryStore
    from harness.memory.store import FileMemoryStore, memory_folder
    from harness.tasks.ledger import LEDGER_FILE, SqliteLedger
    from harness.tasks.ledger_copy import LedgerCopy, copy_ledger
    from harness.tasks.nats_ledger import NatsLedger
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
    notes = (FileMemoryStore(memory_folder(config.tasks_dir)), NatsMemoryStore(store.buckets))
    ledgers = (SqliteLedger(config.tasks_dir / LEDGER_FILE), NatsLedger(config.store))
    forward = to == "nats"
    try:
        tasks = await copy(source, dest, say)
        copied_notes = await copy_notes(*(notes if forward else notes[::-1]))
        if forward and not (config.tasks_dir / LEDGER_FILE).exists():
            ledger = LedgerCopy(0, 0, 0, 0)  # no bot ran here: nothing to copy, none made
        else:
            ledger = await copy_ledger(*(ledgers if forward else ledgers[::-1]))
        return Moved(tasks, copied_notes, ledger)
    finally:
        for opened in ledgers:
            await opened.close()
        await store.close()


def render(done: Moved) -> str:
    tasks, notes, ledger = done.tasks, done.notes, done.ledger
    lines = [
        f"{len(tasks.copied)} task(s) copied, {len(tasks.already)} already there "
        f"(checked), {len(tasks.conflicts)} left (another task of that name there), "
        f"{len(tasks.failed)} unequal when read back.",
        f"{notes.copied} note(s) copied, {notes.already} already there.",
        f"Ledger: {ledger.seen} key(s) seen, {ledger.requests} request(s) taken on, "
        f"{ledger.watches} agent(s) watched, {ledger.owed} message(s) still owed to threads "
        "copied.",
    ]
    if tasks.conflicts:
        lines.append(f"Left: {', '.join(tasks.conflicts)}: rename or remove them there first.")
    if tasks.failed:
        lines.append(f"Unequal: {', '.join(tasks.failed)}: run the migration again.")
    if notes.unequal:
        lines.append(f"Notes missing when read back in: {', '.join(notes.unequal)}: run the "
                     "migration again.")  # fmt: skip
    return "\n".join(lines)
