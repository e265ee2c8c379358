"""The memory store's contract, for every store (the tasks folder's files, a NATS bucket on
a real nats-server), and what only the file store does: its files, its lock across
processes, a damaged file left as it is."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from harness.memory.model import Note, NoteError, NoteLimitError, NoteNotFoundError
from harness.memory.nats_store import NatsMemoryStore
from harness.memory.service import Actor, TeamMemory, proposal_id, team_memory
from harness.memory.store import FileMemoryStore, MemoryStore, memory_folder
from harness.project import Project
from harness.tasks.model import Task, ThreadRef
from harness.tasks.nats_store import NatsTaskStore
from harness.testing.clock import FakeClock
from tests.harness.tasks.nats_fixtures import module_server, settings_for

pytestmark = pytest.mark.anyio


server = module_server()


@pytest.fixture(params=["file", pytest.param("nats", marks=pytest.mark.nats)])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[MemoryStore]:
    """Each store, on a folder or a prefix of its own."""
    if request.param == "file":
        yield FileMemoryStore(memory_folder(tmp_path / "tasks"))
        return
    tasks = NatsTaskStore(settings_for(request.getfixturevalue("nats_url")))
    try:
        yield NatsMemoryStore(tasks.buckets)
    finally:
        await tasks.close()


async def test_notes_are_kept_per_scope_in_the_order_they_were_added(store: MemoryStore) -> None:
    memory = TeamMemory(store, FakeClock())
    first = await memory.add("channel:C1", "use pnpm", by="U1")
    second = await memory.add("channel:C1", "tests: make check", by="U2")
    await memory.add("repository:web", "the API is in api/", by="U1")

    assert [n.text for n in await memory.notes("channel:C1")] == ["use pnpm", "tests: make check"]
    assert (first.added_by, first.source, first.scope) == ("U1", "person", "channel:C1")
    assert first.id != second.id
    assert await memory.notes("channel:C2") == ()
    assert sorted(await memory.scopes()) == ["channel:C1", "repository:web"]


async def test_a_task_gets_its_repository_and_its_channel_notes_only(store: MemoryStore) -> None:
    memory = TeamMemory(store, FakeClock())
    await memory.add("channel:C1", "ours", by="U1")
    await memory.add("channel:C2", "theirs", by="U1")
    await memory.add("repository:web", "web's", by="U1")
    task = Task("t", "now", thread=ThreadRef("C1", "1.0"), repository="web")

    assert [n.text for n in await memory.for_task(task)] == ["web's", "ours"]


async def test_edit_and_remove_check_who_asks_and_a_refusal_changes_nothing(
    store: MemoryStore,
) -> None:
    memory = TeamMemory(store, FakeClock(), admins=("UADMIN",))
    note = await memory.add("channel:C1", "use pnpm", by="U1")

    with pytest.raises(NoteError) as caught:
        await memory.remove("channel:C1", note.id, by=Actor("U2"))
    assert caught.value.code == "NOT_ALLOWED"
    edited = await memory.edit("channel:C1", note.id, "use pnpm 9", by=Actor("UADMIN"))
    assert (edited.text, edited.edited_by) == ("use pnpm 9", "UADMIN")
    removed = await memory.remove("channel:C1", note.id, by=Actor("someone", operator=True))
    assert removed.text == "use pnpm 9"
    assert await memory.notes("channel:C1") == ()
    with pytest.raises(NoteNotFoundError):
        await memory.remove("channel:C1", note.id, by=Actor("U1"))


async def test_a_kept_proposal_is_the_agents_note_kept_once_however_often_kept(
    store: MemoryStore,
) -> None:
    memory = TeamMemory(store, FakeClock())
    kept = await memory.keep_proposal("channel:C1", "lint: ruff", agent_id="a1", index=0, by="U1")
    again = await memory.keep_proposal("channel:C1", "lint: ruff", agent_id="a1", index=0, by="U2")

    assert kept == again and kept.id == proposal_id("a1", 0)
    assert (kept.source, kept.added_by) == ("agent", "U1")
    assert len(await memory.notes("channel:C1")) == 1


async def test_changes_at_once_all_land(store: MemoryStore) -> None:
    memory = TeamMemory(store, FakeClock())
    await asyncio.gather(*(memory.add("channel:C1", f"note {i}", by="U1") for i in range(20)))

    assert sorted(n.text for n in await memory.notes("channel:C1")) == sorted(
        f"note {i}" for i in range(20)
    )


async def test_a_refused_change_leaves_the_notes_as_they_were(store: MemoryStore) -> None:
    memory = TeamMemory(store, FakeClock())
    await memory.add("channel:C1", "kept", by="U1")
    with pytest.raises(NoteLimitError):
        await memory.add("channel:C1", "x" * 10_000, by="U1")

    assert [n.text for n in await memory.notes("channel:C1")] == ["kept"]


# ------------------------------------------------------------------ the file store


def test_the_notes_live_with_the_tasks_readable_by_the_harness_alone(tmp_path: Path) -> None:
    store = FileMemoryStore(memory_folder(tmp_path / "tasks"))
    asyncio.run(TeamMemory(store, FakeClock()).add("repository:web", "use pnpm", by="U1"))

    file = tmp_path / "tasks" / ".memory" / "repository-web.json"
    data = json.loads(file.read_text(encoding="utf-8"))
    assert data["notes"][0]["text"] == "use pnpm" and data["notes"][0]["addedBy"] == "U1"
    assert file.stat().st_mode & 0o077 == 0
    assert (tmp_path / "tasks" / ".memory").stat().st_mode & 0o077 == 0


async def test_a_damaged_file_is_never_overwritten_and_its_scope_refuses_changes(
    tmp_path: Path,
) -> None:
    folder = memory_folder(tmp_path)
    folder.mkdir()
    (folder / "channel-C1.json").write_text("{not json", encoding="utf-8")
    memory = TeamMemory(FileMemoryStore(folder), FakeClock())

    assert await memory.notes("channel:C1") == ()
    with pytest.raises(NoteError) as caught:
        await memory.add("channel:C1", "new", by="U1")
    assert caught.value.code == "MEMORY_DAMAGED" and "channel-C1.json" in caught.value.message
    assert (folder / "channel-C1.json").read_text(encoding="utf-8") == "{not json"


ADD_MANY = """
import asyncio, sys
from pathlib import Path
from harness.clock import SYSTEM
from harness.memory.service import file_memory

async def main() -> None:
    memory = file_memory(Path(sys.argv[1]), SYSTEM)
    for i in range(15):
        await memory.add("channel:C1", f"{sys.argv[2]} {i}", by="U1")

asyncio.run(main())
"""


@pytest.mark.subprocess
def test_two_processes_adding_at_once_lose_no_note(tmp_path: Path) -> None:
    procs = [
        subprocess.Popen([sys.executable, "-c", ADD_MANY, str(tmp_path), name])
        for name in ("bot", "terminal")
    ]
    for proc in procs:
        assert proc.wait(timeout=60) == 0

    notes = asyncio.run(FileMemoryStore(memory_folder(tmp_path)).notes("channel:C1"))
    assert len(notes) == 30 and len({n.id for n in notes}) == 30
    assert isinstance(notes[0], Note)


@pytest.mark.nats
async def test_with_a_nats_task_store_every_machine_reads_the_same_notes_from_the_server(
    project: Project, nats_url: str
) -> None:
    config = dataclasses.replace(project.config, store=settings_for(nats_url))
    here, there = NatsTaskStore(config.store), NatsTaskStore(config.store)
    try:
        await team_memory(config, here, FakeClock()).add("repository:web", "use pnpm", by="U1")
        notes = await team_memory(config, there, FakeClock()).notes("repository:web")
    finally:
        await here.close()
        await there.close()

    assert [n.text for n in notes] == ["use pnpm"]
    assert not memory_folder(config.tasks_dir).exists()
