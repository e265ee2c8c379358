"""Finding the agent processes this test process started, to prove none is left behind."""

from __future__ import annotations

import os
from pathlib import Path


def claude_children(parent: int | None = None) -> set[int]:
    """PIDs of live agent processes whose parent is ``parent`` (default: this process): a
    ``claude`` CLI, or the ``bwrap`` sandbox it runs in (the CLI is inside, a grandchild)."""
    parent = os.getpid() if parent is None else parent
    found: set[int] = set()
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        # Format: pid (comm) state ppid ...; comm may contain spaces, so split at the last ')'.
        comm = text[text.index("(") + 1 : text.rindex(")")]
        fields = text[text.rindex(")") + 2 :].split()
        state, ppid = fields[0], int(fields[1])
        if ppid == parent and ("claude" in comm or comm == "bwrap") and state != "Z":
            found.add(int(stat.parent.name))
    return found
