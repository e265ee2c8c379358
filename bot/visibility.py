"""Which tasks a person may see listed (``/harness tasks``, the App Home tab): the core's
rule (``harness/agents/visibility.py``), with the channels they are in as Slack says."""

from __future__ import annotations

from collections.abc import Sequence

from bot.poster import Poster
from harness.agents.orchestrator import Orchestrator
from harness.agents.visibility import needs_channels, visible
from harness.tasks.model import TaskSummary


async def visible_tasks(
    user: str, summaries: Sequence[TaskSummary], orchestrator: Orchestrator, poster: Poster
) -> list[TaskSummary]:
    """``summaries`` less those ``user`` may not see, in order. Asks Slack which channels
    they are in only when a channel's task is listed; when it would not say, only their own
    tasks and those without a thread (started from the terminal) are shown."""
    member_of = None
    if needs_channels(user, (t.thread for t in summaries)):
        member_of = await poster.channels_of(user)
    may_decide = orchestrator.humans.may_decide
    return visible(user, summaries, may_decide=may_decide, member_of=member_of)
