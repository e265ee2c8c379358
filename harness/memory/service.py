"""``TeamMemory``: the notes people keep (and agents propose) per channel and repository,
for every front end and for the agents' context.

People add, edit and remove notes (in Slack, whoever added a note and the admins may change
it; in the terminal, the operator may change any). An agent never writes one: what it
proposes is kept only when a person keeps it (``keep_proposal``), with an id drawn from the
proposal so that keeping it twice keeps it once.
"""

from __future__ import annotations

import contextlib
import hashlib
from collections.abc import AsyncIterator, Collection, Sequence
from dataclasses import dataclass
from pathlib import Path

from harness.clock import Clock, timestamp
from harness.config.settings import Config
from harness.memory.model import (
    Note,
    NoteError,
    NoteSource,
    clean_text,
    edited,
    find,
    may_change,
    task_scopes,
    with_note,
    without,
)
from harness.memory.store import FileMemoryStore, MemoryStore, memory_folder
from harness.tasks.model import Task

_ID_BYTES = 4


@dataclass(frozen=True)
class Actor:
    """Who changes a note: a person of a front end (``operator``: the terminal's user, who
    may change every note)."""

    user: str
    operator: bool = False


def derived_id(*parts: str) -> str:
    """A note's id drawn from what asked for it (an agent's proposal, a person's message):
    asked again (kept twice, a request replayed after a restart), it is the same note."""
    return "n" + hashlib.sha256(":".join(parts).encode()).hexdigest()[:10]


def proposal_id(agent_id: str, index: int) -> str:
    """The id a kept proposal gets."""
    return derived_id(agent_id, str(index))


class TeamMemory:
    def __init__(self, store: MemoryStore, clock: Clock, admins: Collection[str] = ()) -> None:
        self.store = store
        self._clock = clock
        self._admins = frozenset(admins)

    async def notes(self, scope: str) -> tuple[Note, ...]:
        return await self.store.notes(scope)

    async def scopes(self) -> list[str]:
        return await self.store.scopes()

    async def for_task(self, task: Task) -> tuple[Note, ...]:
        """What every agent of ``task`` is given: its repository's notes, then those of its
        thread's channel."""
        channel = task.thread.channel if task.thread is not None else None
        found: list[Note] = []
        for scope in task_scopes(channel, task.repository):
            found += await self.store.notes(scope)
        return tuple(found)

    async def add(
        self,
        scope: str,
        text: str,
        *,
        by: str,
        source: NoteSource = "person",
        note_id: str | None = None,
    ) -> Note:
        """Adds a note to ``scope``; the note as kept."""
        cleaned = clean_text(text, scope)
        at = timestamp(self._clock.now())
        kept: list[Note] = []

        def change(notes: tuple[Note, ...]) -> tuple[Note, ...]:
            taken = {note.id for note in notes}
            new_id = note_id
            while new_id is None or (note_id is None and new_id in taken):
                new_id = "n" + self._clock.token(_ID_BYTES)
            note = Note(new_id, cleaned, scope, by, at, source)
            changed = with_note(notes, note)
            kept.append(find(changed, new_id))
            return changed

        await self.store.change(scope, change)
        return kept[0]

    async def keep_proposal(self, scope: str, text: str, *, agent_id: str, index: int,
                            by: str) -> Note:  # fmt: skip
        """A person keeps what an agent proposed: a note of source ``agent``, added by them."""
        note_id = proposal_id(agent_id, index)
        return await self.add(scope, text, by=by, source="agent", note_id=note_id)

    async def edit(self, scope: str, note_id: str, text: str, *, by: Actor) -> Note:
        cleaned = clean_text(text, scope)
        at = timestamp(self._clock.now())

        def change(notes: tuple[Note, ...]) -> tuple[Note, ...]:
            self._check(find(notes, note_id), by, "edit")
            return edited(notes, note_id, cleaned, by.user, at)

        return find(await self.store.change(scope, change), note_id)

    async def remove(self, scope: str, note_id: str, *, by: Actor) -> Note:
        """Removes the note; the note removed."""
        removed: list[Note] = []

        def change(notes: tuple[Note, ...]) -> tuple[Note, ...]:
            note = find(notes, note_id)
            self._check(note, by, "remove")
            removed.append(note)
            return without(notes, note_id)

        await self.store.change(scope, change)
        return removed[0]

    async def locate(self, note_id: str, scopes: Sequence[str] | None = None) -> Note:
        """The note ``note_id`` in ``scopes`` (every scope when None)."""
        for scope in scopes if scopes is not None else await self.store.scopes():
            for note in await self.store.notes(scope):
                if note.id == note_id:
                    return note
        return find((), note_id)

    def may_change(self, note: Note, user: str) -> bool:
        return may_change(note, user, self._admins)

    def _check(self, note: Note, by: Actor, what: str) -> None:
        if not by.operator and not self.may_change(note, by.user):
            raise NoteError(
                "NOT_ALLOWED",
                f"only whoever added note {note.id} ({note.added_by}) and the admins may {what} it",
                fix="ask them, or an admin",
                scope=note.scope,
            )


def file_memory(tasks_dir: Path, clock: Clock, admins: Collection[str] = ()) -> TeamMemory:
    """The team's notes kept with the tasks in ``tasks_dir``."""
    return TeamMemory(FileMemoryStore(memory_folder(tasks_dir)), clock, admins)


def team_memory(config: Config, store: object, clock: Clock) -> TeamMemory:
    """The team's notes kept with the tasks: in the NATS store's bucket beside its tasks
    when ``store`` is one (on its connection), else in the tasks folder."""
    admins = config.slack.admins
    if config.store.kind == "nats":
        from harness.memory.nats_store import NatsMemoryStore
        from harness.tasks.nats_tasks import NatsTaskRecords

        if isinstance(store, NatsTaskRecords):
            return TeamMemory(NatsMemoryStore(store.buckets), clock, admins)
    return file_memory(config.tasks_dir, clock, admins)


@contextlib.asynccontextmanager
async def opened_memory(config: Config, clock: Clock) -> AsyncIterator[TeamMemory]:
    """The team's notes for a process with no orchestrator (``harness memory``): on a
    connection of its own to the NATS store, closed at the end, or in the tasks folder."""
    if config.store.kind != "nats":
        yield file_memory(config.tasks_dir, clock, config.slack.admins)
        return
    from harness.tasks.nats_store import NatsTaskStore

    store = NatsTaskStore(config.store, clock=clock)
    try:
        yield team_memory(config, store, clock)
    finally:
        await store.close()
