"""Slack's assistant threads (the split view of an AI app): suggested prompts when a thread
starts, the thread's title from its task, and a status line ("is running a command…") kept
current from the moment a message arrives until the reply.

Bolt counts every threaded DM with the bot as an assistant thread; so does the bot. Status
and title are best effort: a thread where Slack refuses them is left alone from then on.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import TypedDict

from slack_sdk.web.async_client import AsyncWebClient

from bot.blocks import excerpt
from bot.poster import CALL_ERRORS, classify
from harness.agents.pool import AgentInfo
from harness.agents.visibility import is_direct_message
from harness.config.roles import Role
from harness.tasks.model import ThreadRef

logger = logging.getLogger(__name__)

FIRST_STATUS = "is reading your message…"
GREETING = (
    "Hi! Tell me what you need and a team of agents works on it in this thread. "
    "Start with `plan:` for a plan and drafted developers, `review:` for a review, or just "
    "describe a change."
)
_TOOL_STATUS = {
    "Bash": "is running a command…",
    "Edit": "is editing files…",
    "Write": "is writing files…",
    "Read": "is reading the code…",
    "Glob": "is looking through the files…",
    "Grep": "is searching the code…",
    "mcp__harness__draft_agent": "is drafting an agent…",
    "mcp__harness__ask_human": "is asking you something…",
}


class SuggestedPrompt(TypedDict):
    title: str
    message: str


def suggested_prompts(roles: Mapping[str, Role], limit: int = 4) -> list[SuggestedPrompt]:
    """One prompt per role that gives an example request (``example:`` in its front matter)."""
    prompts = [
        SuggestedPrompt(
            title=excerpt(f"{role.display_name}: {role.example}", 75), message=role.example
        )
        for role in roles.values()
        if role.example
    ]
    return prompts[:limit]


def assistant_status(info: AgentInfo) -> str:
    """What the thread's status line says about a live agent."""
    activity = info.activity
    if info.status == "queued":
        return "is waiting for a free agent…"
    if activity.startswith("waiting for approval"):
        return "is waiting for your approval…"
    if activity.startswith("waiting for an answer"):
        return "is waiting for your answer…"
    if activity.startswith("waiting for agent"):
        return "is waiting for the agents it drafted…"
    if activity.startswith("using "):
        return _TOOL_STATUS.get(activity.removeprefix("using "), "is working…")
    if activity in ("writing", "working", "starting", ""):
        return "is writing…" if activity == "writing" else "is working…"
    return excerpt(f"is working: {activity}", 100)  # a progress report in the agent's words


def in_assistant_thread(thread: ThreadRef) -> bool:
    return is_direct_message(thread.channel)


class ThreadStatus:
    """The status line and title of assistant threads."""

    def __init__(self, client: AsyncWebClient) -> None:
        self.client = client
        self._shown: dict[ThreadRef, str] = {}
        self._refused: set[ThreadRef] = set()

    async def show(self, thread: ThreadRef, status: str) -> None:
        """Sets the thread's status ("" clears it), when it changed."""
        if not in_assistant_thread(thread) or thread in self._refused:
            return
        if self._shown.get(thread, "") == status:
            return
        self._shown[thread] = status
        try:
            await self.client.assistant_threads_setStatus(
                channel_id=thread.channel, thread_ts=thread.thread_ts, status=status
            )
        except CALL_ERRORS as exc:
            self._refuse(thread, "status", exc)
            self._shown.pop(thread, None)  # not shown: the next tick tries it again
        if not status:
            self._shown.pop(thread, None)

    async def title(self, thread: ThreadRef, text: str) -> None:
        if not in_assistant_thread(thread) or thread in self._refused:
            return
        try:
            await self.client.assistant_threads_setTitle(
                channel_id=thread.channel, thread_ts=thread.thread_ts, title=excerpt(text, 80)
            )
        except CALL_ERRORS as exc:
            self._refuse(thread, "title", exc)

    def _refuse(self, thread: ThreadRef, what: str, exc: BaseException) -> None:
        error = classify(exc)
        logger.info("assistant thread %s: %s not set (%s)", thread, what, error.error)
        if not error.transient:
            self._refused.add(thread)
