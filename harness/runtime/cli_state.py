"""Where the Claude Code CLI keeps what it writes during a run (transcripts, todos, its state
file), so that nothing an agent leaves lands outside the harness's data folder.

An agent in the OS sandbox has a private home that ends with it: nothing is left. A run
outside it gets a folder of its own from its host (``CLAUDE_CONFIG_DIR``), under the
workspaces root, removed when the run ends: the task's journal keeps every message. A
harness that reaches the model through a Claude Code login (no key or token in its
environment) must leave the CLI its own folder, where the login is; the run's session files
are removed from it afterwards instead.
"""

from __future__ import annotations

import logging
import stat
from collections.abc import Mapping
from pathlib import Path

from harness.boundary.files import BoundaryError, Folder, walk_stats
from harness.workspaces.files import remove_tree

logger = logging.getLogger(__name__)

CONFIG_DIR_ENV = "CLAUDE_CONFIG_DIR"
# Any of these set: the CLI reaches the model without the login in its folder.
MODEL_ACCESS_VARIABLES = (
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_AUTH_TOKEN",
    "CLAUDE_CODE_OAUTH_TOKEN",
    "CLAUDE_CODE_USE_BEDROCK",
    "CLAUDE_CODE_USE_VERTEX",
    "CLAUDE_CODE_USE_FOUNDRY",
)
CREDENTIALS = ".credentials.json"
# Per session, relative to the CLI's folder ({id} is the session id).
SESSION_FILES = (
    "projects/*/{id}.jsonl",
    "projects/*/{id}",
    "todos/{id}*",
    "session-env/{id}",
    "file-history/{id}",
)


def cli_folder(env: Mapping[str, str]) -> Path:
    """The folder the CLI uses when nothing moves it: ``$CLAUDE_CONFIG_DIR``, else
    ``~/.claude``."""
    configured = env.get(CONFIG_DIR_ENV)
    if configured:
        return Path(configured).expanduser()
    return Path(env.get("HOME") or Path.home()) / ".claude"


def login_folder(env: Mapping[str, str]) -> Path | None:
    """The CLI's own folder when the model is reached through a login kept there; None when
    the environment gives the CLI a key, a token or a cloud provider (blocking: a stat)."""
    if any(env.get(name) for name in MODEL_ACCESS_VARIABLES):
        return None
    folder = cli_folder(env)
    return folder if (folder / CREDENTIALS).is_file() else None


def remove_session(folder: Path, session_id: str) -> int:
    """Removes what the CLI wrote in ``folder`` for one session; how many entries went
    (blocking). A session id is a UUID: nothing else can match it. What a run left there is
    not trusted: a link is removed as a link, never followed (neither to remove what it
    leads to nor to decide whether a project folder is empty)."""
    if not session_id or any(c in session_id for c in "/*?[]") or session_id.startswith("."):
        return 0
    removed = 0
    emptied: set[Path] = set()
    for pattern in SESSION_FILES:
        for path in folder.glob(pattern.format(id=session_id)):
            # glob's `*` goes through a linked project folder: such a match is not ours.
            if not _plainly_in(folder, path):
                continue
            if stat.S_ISDIR(path.lstat().st_mode):
                remove_tree(path)  # rmtree removes links inside, never what they lead to
            else:
                path.unlink(missing_ok=True)
            removed += 1
            emptied.add(path.parent)
    for parent in emptied - {folder}:  # a project folder that now holds no file at all
        if parent.parent == folder / "projects" and not _holds_files(parent):
            remove_tree(parent)
    return removed


def _plainly_in(folder: Path, path: Path) -> bool:
    """Whether every folder between ``folder`` and ``path`` is one, not a link to one, and
    ``path`` is still there."""
    try:
        between = path.relative_to(folder).parents
        path.lstat()
        return all(stat.S_ISDIR((folder / part).lstat().st_mode) for part in list(between)[:-1])
    except (OSError, ValueError):
        return False


def _holds_files(path: Path) -> bool:
    """Whether anything but folders is in ``path`` (walked by handle, links not followed)."""
    try:
        with Folder.open(path) as opened:
            return any(not stat.S_ISDIR(info.st_mode) for info in walk_stats(opened))
    except BoundaryError:  # not there (any more), or not a folder
        return False
