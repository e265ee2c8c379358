"""``harness store migrate`` and the task commands on a NATS store, as a user runs them:
subprocesses against a real nats-server."""

from __future__ import annotations

import asyncio
import functools
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.config.store_schema import StoreSettings
from harness.memory.copy import with_missing
from harness.memory.model import Note
from harness.memory.nats_store import NatsMemoryStore
from harness.memory.store import FileMemoryStore, memory_folder
from harness.tasks.files import FileTaskStore
from harness.tasks.ledger import LEDGER_FILE, SqliteLedger
from harness.tasks.ledger_copy import copy_claim
from harness.tasks.ledger_protocol import Owed
from harness.tasks.model import ThreadRef
from harness.tasks.nats_ledger import NatsLedger
from harness.tasks.nats_store import NatsTaskStore
from harness.testing import spawn
from harness.testing.records import make_record
from tests.harness.tasks.nats_fixtures import module_server, settings_for

pytestmark = [pytest.mark.nats, pytest.mark.subprocess]
server = module_server()


def harness(project_dir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return spawn.run(
        [sys.executable, "-m", "harness", *args, "--config", str(project_dir / "config.yaml")],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ},
        check=False,
    )


async def two_tasks(tasks_dir: Path) -> None:
    store = FileTaskStore(tasks_dir)
    try:
        for name in ("Fix the login", "Add a settings page"):
            slug = (await store.create(name, ThreadRef("C1", "1.1"))).slug
            await store.save_dispatch(slug, make_record(f"{slug}-dev", status="completed"))
            store.append_jsonl(slug, "audit.jsonl", {"tool": "Bash", "decision": "allow"})
    finally:
        await store.close()


def use_store(project_dir: Path, kind: str, url: str, prefix: str) -> None:
    config = project_dir / "config.yaml"
    text = config.read_text(encoding="utf-8").split("\nstore:")[0]
    store = f"\nstore: {{kind: {kind}, url: '{url}', prefix: {prefix}}}\n"
    config.write_text(text + store, encoding="utf-8")


def test_tasks_migrated_to_nats_are_listed_shown_and_removed_there(
    project_dir: Path, nats_url: str
) -> None:
    asyncio.run(two_tasks(project_dir / ".agents" / "tasks"))
    prefix = settings_for(nats_url).prefix
    use_store(project_dir, "file", nats_url, prefix)

    migrated = harness(project_dir, "store", "migrate", "--to", "nats")

    assert migrated.returncode == 0, migrated.stderr
    assert "2 task(s) copied, 0 already there" in migrated.stdout
    use_store(project_dir, "nats", nats_url, prefix)
    listed = harness(project_dir, "tasks", "--json")
    assert listed.returncode == 0, listed.stderr
    slugs = sorted(task["slug"] for task in json.loads(listed.stdout)["tasks"])
    assert slugs == ["add-a-settings-page", "fix-the-login"]
    shown = harness(project_dir, "show", "fix-the-login")
    assert shown.returncode == 0 and "Fix the login" in shown.stdout, shown.stderr
    audit = harness(project_dir, "audit", "fix-the-login")
    assert audit.returncode == 0 and "Bash" in audit.stdout, audit.stderr
    removed = harness(project_dir, "rm", "fix-the-login", "--yes")
    assert removed.returncode == 0, removed.stderr
    listed = harness(project_dir, "tasks", "--json")
    assert [task["slug"] for task in json.loads(listed.stdout)["tasks"]] == ["add-a-settings-page"]
    # The folder still has both: the source of a migration is never changed.
    assert (project_dir / ".agents" / "tasks" / "fix-the-login" / "task.json").exists()


def test_a_nats_store_whose_server_is_down_says_so_with_the_fix(project_dir: Path) -> None:
    use_store(project_dir, "nats", "nats://127.0.0.1:1", "down")

    listed = harness(project_dir, "tasks")

    assert listed.returncode != 0
    assert "the task store at NATS nats://127.0.0.1:1 cannot be reached" in listed.stderr
    assert "nats-server" in listed.stderr and "Traceback" not in listed.stderr


def test_a_nats_store_without_a_server_is_refused_with_the_field_and_fix(
    project_dir: Path,
) -> None:
    config = project_dir / "config.yaml"
    config.write_text(config.read_text(encoding="utf-8") + "\nstore: {kind: nats}\n", "utf-8")

    listed = harness(project_dir, "tasks")

    assert listed.returncode != 0
    assert "store.url" in listed.stderr and "runtime.url" in listed.stderr
    assert "Traceback" not in listed.stderr


NOTE = Note("n1", "Run `make check` before a PR", "channel:C1", "U1", "2026-01-01T10:00:00.000Z")


async def notes_and_ledger(tasks_dir: Path) -> None:
    """A note of the team's, and a bot's ledger: a key seen, an agent watched, a message a
    thread is still owed with one of its two steps done."""
    await FileMemoryStore(memory_folder(tasks_dir)).change(
        "channel:C1", lambda notes: (*notes, NOTE)
    )
    ledger = SqliteLedger(tasks_dir / LEDGER_FILE)
    try:
        await ledger.remember(["event:Ev1"], 1_700_000_000.0)
        await ledger.watch("a1", {"thread": "C1/1.1"})
        owed = await ledger.owe("C1/1.1", {"text": "✅ developer finished"})
        await ledger.advance(owed, 1)
    finally:
        await ledger.close()


async def on_nats(settings: StoreSettings) -> tuple[tuple[Note, ...], list[Owed], list[str]]:
    store = NatsTaskStore(settings)
    ledger = NatsLedger(settings)
    try:
        notes = await NatsMemoryStore(store.buckets).notes("channel:C1")
        seen = [key for key, _ in await ledger.recent(0.0)]
        return notes, await ledger.pending(), seen
    finally:
        await ledger.close()
        await store.close()


def test_the_team_s_notes_and_the_bot_s_ledger_move_with_the_tasks_once(
    project_dir: Path, nats_url: str
) -> None:
    tasks_dir = project_dir / ".agents" / "tasks"
    asyncio.run(two_tasks(tasks_dir))
    asyncio.run(notes_and_ledger(tasks_dir))
    settings = settings_for(nats_url)
    use_store(project_dir, "file", nats_url, settings.prefix)

    first = harness(project_dir, "store", "migrate", "--to", "nats")
    again = harness(project_dir, "store", "migrate", "--to", "nats")  # as after a cut-off run

    assert first.returncode == 0, first.stderr
    assert "1 note(s) copied, 0 already there." in first.stdout
    assert "1 agent(s) watched, 1 message(s) still owed to threads copied." in first.stdout
    assert again.returncode == 0, again.stderr
    assert "0 note(s) copied, 1 already there." in again.stdout
    assert "0 message(s) still owed to threads copied." in again.stdout
    notes, owed, seen = asyncio.run(on_nats(settings))
    assert notes == (NOTE,)
    assert [(entry.lane, entry.data, entry.step) for entry in owed] == [
        ("C1/1.1", {"text": "✅ developer finished"}, 1)
    ]
    assert "event:Ev1" in seen  # Slack's retry of that event is still a duplicate there


SECOND = Note(
    "n2", "Deploys go out on Tuesdays", "repository:web", "U2", "2026-01-02T10:00:00.000Z"
)


async def notes_and_ledger_on_nats(settings: StoreSettings) -> list[Owed]:
    """Two notes and a ledger owing two threads a message (one with a step done) on NATS;
    what it owes."""
    store = NatsTaskStore(settings)
    ledger = NatsLedger(settings)
    try:
        memory = NatsMemoryStore(store.buckets)
        for note in (NOTE, SECOND):
            await memory.change(note.scope, functools.partial(with_missing, notes=(note,)))
        await ledger.remember(["event:Ev2"], 1_700_000_000.0)
        first = await ledger.owe("C1/1.1", {"text": "✅ developer finished"})
        await ledger.advance(first, 1)
        await ledger.owe("C2/2.2", {"text": "⚠️ reviewer was interrupted"})
        return await ledger.pending()
    finally:
        await ledger.close()
        await store.close()


async def cut_off_copy(tasks_dir: Path, owed: Owed) -> None:
    """What a copy back cut off midway leaves in the folder: the first note, and the first
    owed message (claimed as the copy claims it)."""
    await FileMemoryStore(memory_folder(tasks_dir)).change(NOTE.scope, lambda notes: (NOTE,))
    ledger = SqliteLedger(tasks_dir / LEDGER_FILE)
    try:
        copied = await ledger.owe_once(copy_claim(owed), owed.lane, owed.data)
        assert copied is not None
    finally:
        await ledger.close()


async def in_folder(tasks_dir: Path) -> tuple[list[Note], list[Owed], list[str]]:
    memory = FileMemoryStore(memory_folder(tasks_dir))
    notes = [note for scope in await memory.scopes() for note in await memory.notes(scope)]
    ledger = SqliteLedger(tasks_dir / LEDGER_FILE)
    try:
        return notes, await ledger.pending(), [key for key, _ in await ledger.recent(0.0)]
    finally:
        await ledger.close()


def test_notes_and_the_ledger_moved_back_to_files_after_a_cut_off_copy_arrive_once(
    project_dir: Path, nats_url: str
) -> None:
    tasks_dir = project_dir / ".agents" / "tasks"
    settings = settings_for(nats_url)
    owed = asyncio.run(notes_and_ledger_on_nats(settings))
    asyncio.run(cut_off_copy(tasks_dir, owed[0]))
    use_store(project_dir, "nats", nats_url, settings.prefix)

    resumed = harness(project_dir, "store", "migrate", "--to", "file")
    again = harness(project_dir, "store", "migrate", "--to", "file")

    assert resumed.returncode == 0, resumed.stderr
    assert "1 note(s) copied, 1 already there." in resumed.stdout
    assert "1 message(s) still owed to threads copied." in resumed.stdout
    assert again.returncode == 0, again.stderr
    assert "0 note(s) copied, 2 already there." in again.stdout
    assert "0 message(s) still owed to threads copied." in again.stdout
    notes, pending, seen = asyncio.run(in_folder(tasks_dir))
    assert sorted(note.id for note in notes) == ["n1", "n2"]
    assert sorted((entry.lane, entry.data["text"]) for entry in pending) == [
        ("C1/1.1", "✅ developer finished"),
        ("C2/2.2", "⚠️ reviewer was interrupted"),
    ]
    assert "event:Ev2" in seen  # a retry of that event is still a duplicate after the move
