"""An agent started for a kept click (*Approve and implement*, *Run again*), in its thread's
lane: drafted, or the thread owed why not; the message the button was under marked with the
agent that runs now; and the agent's watch taking the click over, so that its end is what is
owed from then on.

The bot's conversations are what run it; they are named here by the parts used (``Crew``),
since they import the modules that start agents for clicks.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Protocol

from bot.blocks import SlackMessage
from bot.clicks import KeptClick
from bot.outbox import Outbox
from bot.poster import Poster
from bot.threads import ThreadLanes
from harness.agents.dispatching import AgentHandle
from harness.errors import HarnessError

if TYPE_CHECKING:
    from bot.progress import AgentWatcher


class Crew(Protocol):
    """What starting an agent for a click uses of the bot's conversations."""

    closing: bool
    outbox: Outbox
    poster: Poster
    watcher: AgentWatcher
    lanes: ThreadLanes


def start_for_click(
    crew: Crew,
    click: KeptClick,
    draft: Callable[[], Awaitable[AgentHandle]],
    *,
    slug: str,
    refused: str,
    marked: Callable[[dict[str, Any], AgentHandle], SlackMessage],
    name: str,
) -> None:
    """Queues, in the click's thread, the agent ``draft`` starts for ``click``: a draft the
    harness refuses is owed to the thread as ``refused: why``; the message the button was
    under (``extra["notice"]``) becomes ``marked(notice, handle)``."""
    thread = click.thread

    async def start() -> None:
        if crew.closing:
            return  # still kept: the next start runs it
        try:
            handle = await draft()
        except HarnessError as exc:  # e.g. the task's budget is spent: the thread hears why
            text = f"⚠️ {refused}: {exc.message}." + (f" {exc.fix}." if exc.fix else "")
            await crew.outbox.owe(thread, [{"op": "post", "message": text}], handles=click.key)
            return
        notice = click.extra.get("notice")
        if isinstance(notice, dict) and isinstance(notice.get("ts"), str):
            await crew.poster.update(thread.channel, notice["ts"], marked(notice, handle))
        # The agent's watch takes the click over: from now on its end is what is owed.
        await crew.watcher.follow(
            thread, handle.agent_id, handle.role, task_slug=slug, handles=click.key
        )

    crew.lanes.enqueue(thread, start, name=name)
