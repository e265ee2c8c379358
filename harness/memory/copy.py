"""Copying the team's notes between the tasks folder and the NATS store (``harness store
migrate``, beside the tasks): each scope's notes the destination lacks (by id) are added,
then read back. The source is only read and a note already there is left as it is, so an
interrupted copy loses nothing and a second run adds nothing twice."""

from __future__ import annotations

import functools
from dataclasses import dataclass

from harness.memory.model import Note
from harness.memory.store import MemoryStore


@dataclass(frozen=True)
class NotesCopy:
    copied: int  # notes added now
    already: int  # notes the destination had (by id)
    unequal: tuple[str, ...]  # scopes missing a note when read back


def with_missing(existing: tuple[Note, ...], notes: tuple[Note, ...]) -> tuple[Note, ...]:
    """``existing`` and then each of ``notes`` whose id it lacks, in order."""
    have = {note.id for note in existing}
    return (*existing, *(note for note in notes if note.id not in have))


async def copy_notes(source: MemoryStore, dest: MemoryStore) -> NotesCopy:
    copied = already = 0
    unequal: list[str] = []
    for scope in await source.scopes():
        notes = await source.notes(scope)
        before = {note.id for note in await dest.notes(scope)}
        after = await dest.change(scope, functools.partial(with_missing, notes=notes))
        kept = {note.id for note in after}
        if any(note.id not in kept for note in notes):
            unequal.append(scope)
        fresh = sum(note.id not in before for note in notes)
        copied, already = copied + fresh, already + len(notes) - fresh
    return NotesCopy(copied, already, tuple(unequal))
