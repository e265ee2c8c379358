"""The team's notes: what one is, where it belongs (a scope), its limits and who may change
it (pure).

A scope is ``channel:<id>`` (a Slack channel or DM: every agent of a task in that thread's
channel gets its notes) or ``repository:<name>`` (every agent working in that configured
repository). Notes are short by design: they are given to every agent of their scope, so a
scope holds at most ``MAX_NOTES`` of at most ``MAX_NOTE_CHARS`` characters each.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal, TypedDict, get_args

from harness.errors import HarnessError

ScopeKind = Literal["channel", "repository"]
NoteSource = Literal["person", "agent"]
SCOPE_KINDS: tuple[ScopeKind, ...] = get_args(ScopeKind)
SOURCES: tuple[NoteSource, ...] = get_args(NoteSource)
MAX_NOTE_CHARS = 500
MAX_NOTES = 50
# A scope's name is part of a file name and a NATS key: letters, digits, ``.``, ``_``, ``-``.
_NAME = re.compile(r"^[A-Za-z0-9_-][A-Za-z0-9._-]{0,99}$")
NOTE_ID = re.compile(r"^n[0-9a-f]{6,16}$")


class NoteError(HarnessError):
    """A note cannot be added, changed or removed as asked; ``code`` says which rule."""

    def __init__(self, code: str, message: str, *, fix: str, scope: str | None = None) -> None:
        super().__init__(message, fix=fix)
        self.code = code
        self.scope = scope


class NoteLimitError(NoteError):
    """A note is too long, or its scope holds as many notes as it may."""

    def __init__(self, code: str, message: str, *, fix: str, scope: str, limit: int) -> None:
        super().__init__(code, message, fix=fix, scope=scope)
        self.limit = limit


class NoteNotFoundError(NoteError):
    def __init__(self, note_id: str, scope: str | None = None) -> None:
        where = f" in {describe_scope(scope)}" if scope else ""
        super().__init__(
            "NOTE_NOT_FOUND",
            f"no note {note_id!r}{where}",
            fix="list the notes (`harness memory list`, or `/harness memory` in Slack) for "
            "their ids",
            scope=scope,
        )
        self.note_id = note_id


def scope_of(kind: ScopeKind, name: str) -> str:
    """The scope ``kind:name``; a name that cannot be one is refused."""
    if not _NAME.match(name):
        raise NoteError(
            "BAD_SCOPE",
            f"{name[:60]!r} cannot name a {kind}: use letters, digits, '.', '_' or '-'",
            fix="name the channel by its id (C0123456789) or a repository as config.yaml's "
            "workspaces.repositories does",
        )
    return f"{kind}:{name}"


def parse_scope(text: str) -> str:
    """``channel:<id>`` or ``repository:<name>`` (``repo:`` too), checked."""
    kind, sep, name = text.partition(":")
    if sep and kind in ("repo", "repository"):
        return scope_of("repository", name)
    if sep and kind == "channel":
        return scope_of("channel", name)
    raise _not_a_scope(text)


def split_scope(scope: str) -> tuple[ScopeKind, str]:
    """A scope's kind and name; anything else (a button's value, a key) is refused."""
    kind, sep, name = scope.partition(":")
    if not sep or kind not in SCOPE_KINDS or not _NAME.match(name):
        raise _not_a_scope(scope)
    return ("repository" if kind == "repository" else "channel"), name


def _not_a_scope(text: str) -> NoteError:
    return NoteError(
        "BAD_SCOPE",
        f"{text[:60]!r} is not a scope",
        fix="write channel:<channel id> or repository:<name> (repo:<name> for short)",
    )


def describe_scope(scope: str) -> str:
    """``channel C0123`` or ``repository web``, for people."""
    kind, name = split_scope(scope)
    return f"{kind} {name}"


def task_scopes(channel: str | None, repository: str | None) -> tuple[str, ...]:
    """The scopes whose notes an agent of a task gets: its repository's, then its thread's
    channel's (never another channel's). A name that cannot be a scope has no notes."""
    found = []
    for kind, name in (("repository", repository), ("channel", channel)):
        if name and _NAME.match(name):
            found.append(f"{kind}:{name}")
    return tuple(found)


@dataclass(frozen=True)
class Note:
    id: str
    text: str
    scope: str
    added_by: str  # a Slack user id, or the terminal's user
    at: str  # when it was added (ISO)
    source: NoteSource = "person"  # an agent's proposal, kept by ``added_by``
    edited_by: str | None = None
    edited_at: str | None = None


class NoteJson(TypedDict, total=False):
    id: str
    text: str
    scope: str
    addedBy: str
    at: str
    source: str
    editedBy: str
    editedAt: str


def note_to_json(note: Note) -> NoteJson:
    data: NoteJson = {
        "id": note.id,
        "text": note.text,
        "scope": note.scope,
        "addedBy": note.added_by,
        "at": note.at,
        "source": note.source,
    }
    if note.edited_by is not None and note.edited_at is not None:
        data["editedBy"], data["editedAt"] = note.edited_by, note.edited_at
    return data


def note_from_json(data: Any, scope: str) -> Note | None:
    """A stored note (None: not one; the rest of its scope still reads)."""
    if not isinstance(data, dict):
        return None
    fields = [data.get(key) for key in ("id", "text", "addedBy", "at")]
    if not all(isinstance(value, str) for value in fields):
        return None
    source = data.get("source")
    edited_by, edited_at = data.get("editedBy"), data.get("editedAt")
    return Note(
        id=str(data["id"]),
        text=str(data["text"]),
        scope=scope,
        added_by=str(data["addedBy"]),
        at=str(data["at"]),
        source="agent" if source == "agent" else "person",
        edited_by=edited_by if isinstance(edited_by, str) else None,
        edited_at=edited_at if isinstance(edited_at, str) else None,
    )


def clean_text(text: str, scope: str) -> str:
    """The note's text, one paragraph, within ``MAX_NOTE_CHARS``; an empty or longer one is
    refused (a note is never cut silently)."""
    cleaned = " ".join(text.split())
    if not cleaned:
        raise NoteError(
            "EMPTY_NOTE", "the note is empty", fix="write what to remember", scope=scope
        )
    if len(cleaned) > MAX_NOTE_CHARS:
        raise NoteLimitError(
            "NOTE_TOO_LONG",
            f"the note is {len(cleaned)} characters; a note holds at most {MAX_NOTE_CHARS}",
            fix="shorten it, or split it into notes of one fact each",
            scope=scope,
            limit=MAX_NOTE_CHARS,
        )
    return cleaned


def with_note(notes: Sequence[Note], note: Note) -> tuple[Note, ...]:
    """``notes`` with ``note`` added; the same note again (its id) is added once."""
    if any(kept.id == note.id for kept in notes):
        return tuple(notes)
    if len(notes) >= MAX_NOTES:
        raise NoteLimitError(
            "TOO_MANY_NOTES",
            f"{describe_scope(note.scope)} already holds {len(notes)} notes, the most it may",
            fix="remove a note that no longer holds, or merge two into one (`harness memory "
            "rm|edit`, or the Remove buttons of `/harness memory`)",
            scope=note.scope,
            limit=MAX_NOTES,
        )
    return (*notes, note)


def edited(notes: Sequence[Note], note_id: str, text: str, by: str, at: str) -> tuple[Note, ...]:
    found = find(notes, note_id)
    changed = replace(found, text=text, edited_by=by, edited_at=at)
    return tuple(changed if note.id == note_id else note for note in notes)


def without(notes: Sequence[Note], note_id: str) -> tuple[Note, ...]:
    find(notes, note_id)
    return tuple(note for note in notes if note.id != note_id)


def find(notes: Sequence[Note], note_id: str) -> Note:
    for note in notes:
        if note.id == note_id:
            return note
    raise NoteNotFoundError(note_id, notes[0].scope if notes else None)


def may_change(note: Note, user: str, admins: Collection[str]) -> bool:
    """Who may remove or edit a note in Slack: whoever added it (kept it, for an agent's
    proposal) and the admins."""
    return user == note.added_by or user in admins
