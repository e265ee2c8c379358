"""Who asked for each task: the Slack user whose message started it.

Kept by the bot in its own small JSON file next to the tasks,
``<tasks dir>/.slack-requesters.json`` = ``{"version": 1, "requesters": {slug: user id}}``,
because the task store is interface-agnostic (no Slack user in task.json) and the thread's
parent message is not always the requester (an @mention inside someone else's thread). The
name starts with a dot, so the task store never mistakes it for a task. Writes are atomic.
"""

from __future__ import annotations

import asyncio
import json
import logging
from pathlib import Path

from harness.atomic import write_atomic

logger = logging.getLogger(__name__)

FILE_NAME = ".slack-requesters.json"


class Requesters:
    def __init__(self, tasks_dir: Path) -> None:
        self.path = tasks_dir / FILE_NAME
        self._users: dict[str, str] = {}
        self._write_lock = asyncio.Lock()

    def load(self) -> None:
        """Reads the file (blocking); a missing file is an empty record, a broken one is
        reported and set aside rather than stopping the bot."""
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return
        except (OSError, ValueError) as exc:
            logger.warning("ignoring unreadable %s: %s", self.path, exc)
            return
        users = data.get("requesters") if isinstance(data, dict) else None
        if isinstance(users, dict):
            self._users.update(
                {k: v for k, v in users.items() if isinstance(k, str) and isinstance(v, str)}
            )

    def get(self, slug: str) -> str | None:
        return self._users.get(slug)

    def remember(self, slug: str, user: str) -> None:
        """Known at once (for /harness kill); ``save`` writes it to the file."""
        self._users[slug] = user

    async def set(self, slug: str, user: str) -> None:
        self.remember(slug, user)
        await self.save()

    async def save(self) -> None:
        async with self._write_lock:
            snapshot = dict(self._users)
            await asyncio.to_thread(self._write, snapshot)

    def _write(self, users: dict[str, str]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        text = json.dumps({"version": 1, "requesters": users}, indent=2, sort_keys=True)
        write_atomic(self.path, (text + "\n").encode("utf-8"))
