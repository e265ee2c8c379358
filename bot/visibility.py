"""Which tasks a person may see listed (``/harness tasks``, the App Home tab): the tasks of
the channels they are in and their own DMs; the admins see all. Nobody reads the request of
a thread they could not read in Slack."""

from __future__ import annotations

from collections.abc import Sequence

from bot.access import is_dm_channel
from bot.poster import Poster
from harness.agents.orchestrator import Orchestrator
from harness.tasks.model import TaskSummary


async def visible_tasks(
    user: str, summaries: Sequence[TaskSummary], orchestrator: Orchestrator, poster: Poster
) -> list[TaskSummary]:
    """``summaries`` less those ``user`` may not see, in order. Asks Slack which channels
    they are in only when a channel's task is listed; when it would not say, only their own
    tasks and those without a thread (started from the terminal) are shown."""
    member_of: frozenset[str] | None = frozenset()
    if any(t.thread and not is_dm_channel(t.thread.channel) for t in summaries):
        member_of = await poster.channels_of(user)
    return [
        t
        for t in summaries
        if t.thread is None
        or orchestrator.may_decide(user, t.requester)
        or (not is_dm_channel(t.thread.channel) and t.thread.channel in (member_of or ()))
    ]
