"""A note's rules: its scope, its length, how many a scope holds, who may change it."""

from __future__ import annotations

import pytest

from harness.memory.model import (
    MAX_NOTE_CHARS,
    MAX_NOTES,
    Note,
    NoteError,
    NoteLimitError,
    NoteNotFoundError,
    clean_text,
    edited,
    may_change,
    note_from_json,
    note_to_json,
    parse_scope,
    split_scope,
    task_scopes,
    with_note,
    without,
)


def note(note_id: str, text: str = "run make check", by: str = "U1") -> Note:
    return Note(note_id, text, "channel:C1", by, "2026-01-01T10:00:00.000Z")


def test_scopes_are_a_channel_or_a_repository_and_nothing_that_could_leave_the_folder() -> None:
    assert parse_scope("channel:C0123") == "channel:C0123"
    assert parse_scope("repo:web") == "repository:web"
    assert parse_scope("repository:api.v2") == "repository:api.v2"
    for bad in ("web", "team:C1", "channel:../x", "repository:.hidden", "channel:", "repo:a/b"):
        with pytest.raises(NoteError) as caught:
            parse_scope(bad)
        assert caught.value.code == "BAD_SCOPE" and caught.value.fix


def test_a_scope_read_back_from_a_button_or_a_key_is_checked_too() -> None:
    assert split_scope("repository:web") == ("repository", "web")
    for forged in ("channel:../../etc/passwd", "repository:a/b", "team:C1", "channel"):
        with pytest.raises(NoteError) as caught:
            split_scope(forged)
        assert caught.value.code == "BAD_SCOPE"


def test_a_task_gets_its_repository_then_its_own_channel_and_no_other() -> None:
    assert task_scopes("C1", "web") == ("repository:web", "channel:C1")
    assert task_scopes(None, "web") == ("repository:web",)
    assert task_scopes("C1", None) == ("channel:C1",)
    assert task_scopes("../C1", None) == ()


def test_a_note_is_one_paragraph_and_a_longer_one_is_refused_not_cut() -> None:
    assert clean_text("  use   pnpm,\nnot npm ", "channel:C1") == "use pnpm, not npm"
    with pytest.raises(NoteLimitError) as caught:
        clean_text("x" * (MAX_NOTE_CHARS + 1), "channel:C1")
    assert caught.value.code == "NOTE_TOO_LONG" and caught.value.limit == MAX_NOTE_CHARS
    assert str(MAX_NOTE_CHARS + 1) in caught.value.message
    with pytest.raises(NoteError, match="empty"):
        clean_text(" \n ", "channel:C1")


def test_a_full_scope_refuses_one_more_note_and_the_same_note_is_added_once() -> None:
    notes = tuple(note(f"n{i:06x}") for i in range(MAX_NOTES))
    with pytest.raises(NoteLimitError) as caught:
        with_note(notes, note("nffffff"))
    assert caught.value.code == "TOO_MANY_NOTES" and caught.value.scope == "channel:C1"
    assert "rm" in caught.value.fix
    assert with_note(notes[:1], notes[0]) == notes[:1]


def test_editing_and_removing_name_the_note_and_a_missing_one_is_a_clear_error() -> None:
    notes = (note("n000001"), note("n000002", "deploy with make ship"))
    changed = edited(notes, "n000002", "deploy with make release", "U2", "later")
    assert changed[1].text == "deploy with make release" and changed[1].edited_by == "U2"
    assert without(notes, "n000001") == notes[1:]
    with pytest.raises(NoteNotFoundError) as caught:
        without(notes, "n0000ff")
    assert caught.value.note_id == "n0000ff" and "harness memory list" in caught.value.fix


def test_only_whoever_added_a_note_and_the_admins_may_change_it() -> None:
    assert may_change(note("n000001", by="U1"), "U1", ())
    assert may_change(note("n000001", by="U1"), "UADMIN", ("UADMIN",))
    assert not may_change(note("n000001", by="U1"), "U2", ("UADMIN",))


def test_a_note_reads_back_as_written_and_a_broken_entry_reads_as_none() -> None:
    kept = Note("n1", "t", "repository:web", "U1", "at", "agent", "U2", "later")
    assert note_from_json(note_to_json(kept), "repository:web") == kept
    assert note_from_json({"id": "n1", "text": 3}, "channel:C1") is None
    assert note_from_json("nope", "channel:C1") is None
