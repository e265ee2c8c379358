"""How the MCP server posts a task in a chat channel (Slack) without importing it: a front
end registers a factory under the entry point group ``harness.announcers`` (the bot:
``bot.mcp_announce:from_environ``); it is given the environment and returns an Announcer, or
None when it is not configured there (no ``SLACK_BOT_TOKEN``)."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from importlib.metadata import entry_points
from typing import Protocol

from harness.tasks.model import DispatchRecord, ThreadRef

logger = logging.getLogger(__name__)

ANNOUNCER_GROUP = "harness.announcers"


class Announcer(Protocol):
    async def open_thread(
        self, channel: str, thread_ts: str | None, text: str, requester: str
    ) -> ThreadRef:
        """Post a request ``requester`` made as a new message in ``channel`` (its thread is
        the task's), or as a reply in the thread ``thread_ts``; the thread."""
        ...

    async def post_result(
        self, thread: ThreadRef, task_slug: str, record: DispatchRecord, diff: str | None
    ) -> None:
        """Post an agent's final record in the task's thread."""
        ...

    async def channels_of(self, user: str) -> frozenset[str] | None:
        """The channels ``user`` is in (who may see which task), None when unknown."""
        ...

    async def close(self) -> None: ...


AnnouncerFactory = Callable[[Mapping[str, str]], Announcer | None]


def load_announcer(environ: Mapping[str, str]) -> Announcer | None:
    """The first announcer a front end provides for this environment; None without one."""
    found = {point.name: point for point in entry_points(group=ANNOUNCER_GROUP)}
    for point in found.values():
        factory: AnnouncerFactory = point.load()
        announcer = factory(environ)
        if announcer is not None:
            logger.info("tasks can be posted through the %s announcer", point.name)
            return announcer
    return None
