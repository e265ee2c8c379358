"""Agents drafted by an agent of a bound task show up in its thread, like the bot's own: an
introduction naming who drafted them and why, then their progress and result."""

from __future__ import annotations

import logging

from bot.background import Background
from bot.blocks import drafted_intro
from bot.progress import AgentWatcher
from harness.agents.events import AgentEvent
from harness.agents.orchestrator import Orchestrator
from harness.tasks.model import DispatchRecord, Task, ThreadRef

logger = logging.getLogger(__name__)


class DraftedAgents:
    def __init__(
        self,
        orchestrator: Orchestrator,
        watcher: AgentWatcher,
        background: Background,
    ) -> None:
        self.orchestrator = orchestrator
        self.watcher = watcher
        self.background = background
        orchestrator.subscribe(self._on_agent_event)

    def _on_agent_event(self, event: AgentEvent) -> None:
        record, task = event.record, event.task
        if event.kind != "queued" or record.parent_id is None or task.thread is None:
            return
        parent_role = next(
            (d.role for d in task.dispatches if d.agent_id == record.parent_id), None
        )
        if parent_role is None:
            parent = self.orchestrator.agent(record.parent_id)
            parent_role = parent.role if parent else None
        intro = drafted_intro(
            parent_role, record.parent_id, record.role, record.agent_id, record.prompt
        )
        drafted_by = f"{parent_role or 'agent'} {record.parent_id}"
        self.background.spawn(
            self._follow(task.thread, record, task, intro, drafted_by),
            name=f"drafted {record.agent_id}",
        )

    async def _follow(
        self, thread: ThreadRef, record: DispatchRecord, task: Task, intro: str, drafted_by: str
    ) -> None:
        try:
            await self.watcher.follow(
                thread,
                record.agent_id,
                record.role,
                task_slug=task.slug,
                intro=intro,
                drafted_by=drafted_by,
                recipient=task.requester,
            )
        except Exception:  # the top of a drafted agent's thread view
            logger.exception("showing drafted agent %s in %s failed", record.agent_id, thread)
