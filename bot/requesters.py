"""Moving who asked for each task out of the bot's own file and into task.json.

Earlier versions kept the requesters in ``<tasks dir>/.slack-requesters.json`` =
``{"version": 1, "requesters": {slug: user id}}``; task.json now records the requester, so
the core decides who may approve, stop and run again. At start-up the bot copies each one it
finds into its task (unless the task already names one) and renames the file
``.slack-requesters.json.migrated``, so it is read once.
"""

from __future__ import annotations

import asyncio
import json
import logging
from pathlib import Path

from harness.agents.task_desk import TaskDesk
from harness.errors import HarnessError

logger = logging.getLogger(__name__)

FILE_NAME = ".slack-requesters.json"


def _read(path: Path) -> dict[str, str]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        logger.warning("ignoring unreadable %s: %s", path, exc)
        return {}
    users = data.get("requesters") if isinstance(data, dict) else None
    if not isinstance(users, dict):
        return {}
    return {k: v for k, v in users.items() if isinstance(k, str) and isinstance(v, str)}


async def migrate_requesters(tasks: TaskDesk, tasks_dir: Path) -> int:
    """Copies the requesters of an earlier version's file into their tasks; how many."""
    path = tasks_dir / FILE_NAME
    users = await asyncio.to_thread(_read, path)
    moved = 0
    for slug, user in users.items():
        try:
            task = await tasks.task(slug)
            if task.requester is None:
                await tasks.set_requester(slug, user)
                moved += 1
        except HarnessError as exc:  # a task deleted or damaged since: nothing to keep
            logger.info("requester of %s not moved: %s", slug, exc.message)
    if users:
        await asyncio.to_thread(path.replace, path.with_name(FILE_NAME + ".migrated"))
        logger.info("moved %d requester(s) from %s into task.json", moved, path)
    return moved
