"""The team's memory: short notes kept per Slack channel and per repository, given to every
agent of that channel or repository in its context.

Modules: ``model`` (a note, its scope, its limits and who may change it; pure), ``store``
(the ``MemoryStore`` protocol and the file store, ``<tasks dir>/.memory``), ``service``
(``TeamMemory``: adding, editing, removing, keeping an agent's proposal, a task's notes).
"""

from harness.memory.model import MAX_NOTE_CHARS, MAX_NOTES, Note, NoteError, NoteLimitError
from harness.memory.service import Actor, TeamMemory, file_memory

__all__ = [
    "MAX_NOTES",
    "MAX_NOTE_CHARS",
    "Actor",
    "Note",
    "NoteError",
    "NoteLimitError",
    "TeamMemory",
    "file_memory",
]
