"""A ref of a repository's git directory C read from C's files, without starting git: taking a
spare worktree is on a warm start's path, and each git process costs it a few milliseconds.

Only C is read so: the operator's git directory, which no agent writes. Where its files cannot
say for sure (refs kept in a reftable, a symbolic ref, a file that is not one object id, a
name git would refuse), the answer is ``UNSURE`` and the caller asks git.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Final, Literal

Unsure = Literal["unsure"]
UNSURE: Final[Unsure] = "unsure"

_OBJECT_ID = re.compile(r"[0-9a-f]{40}([0-9a-f]{24})?")  # SHA-1 or SHA-256


def packed_ref(packed: str, ref: str) -> str | None:
    """The object id a ``packed-refs`` text gives ``ref``; None when it lists no such ref
    (pure). Comment lines (``#``) and peeled ids (``^<id>``, a tag's commit) are not refs."""
    for line in packed.splitlines():
        if line.startswith(("#", "^")):
            continue
        object_id, _, name = line.partition(" ")
        if name == ref:
            return object_id
    return None


def read_ref(common: Path, ref: str) -> str | Unsure | None:
    """``ref``'s object id in the git directory ``common``: its loose file's, else the one
    ``packed-refs`` lists; None when C has no such ref; UNSURE when its files cannot say
    (blocking)."""
    if not ref.startswith("refs/") or ".." in ref or "//" in ref or ref.endswith("/"):
        return UNSURE
    if (common / "reftable").exists():
        return UNSURE
    try:
        loose = (common / ref).read_text(encoding="ascii")
    except FileNotFoundError:
        pass
    except (OSError, UnicodeDecodeError):  # a folder of refs, unreadable, not ascii
        return UNSURE
    else:
        found = loose.strip()
        return found if _OBJECT_ID.fullmatch(found) else UNSURE
    try:
        packed = (common / "packed-refs").read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError):
        return UNSURE
    listed = packed_ref(packed, ref)
    return listed if listed is None or _OBJECT_ID.fullmatch(listed) else UNSURE
