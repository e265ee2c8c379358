"""One agent seen from its thread: a status message kept current at a Slack-friendly rate
(elapsed time and what the agent is doing, from ``orchestrator.agents()``), then replaced by
the rendered result."""

from __future__ import annotations

import asyncio
import logging

from bot.blocks import diff_file_name, diff_fits_inline, render_record, status_text
from bot.poster import Poster
from harness.orchestrator import Orchestrator
from harness.results import DispatchRecord, ThreadRef

logger = logging.getLogger(__name__)


class AgentWatcher:
    def __init__(self, orchestrator: Orchestrator, poster: Poster, *, interval: float) -> None:
        self.orchestrator = orchestrator
        self.poster = poster
        self.interval = interval
        # agent id -> Slack user who stopped it with /harness kill (shown in its thread).
        self.stopped_by: dict[str, str] = {}

    def status(self, agent_id: str, role: str, intro: str | None = None) -> str | None:
        """The status line of a live agent; None once it is no longer live."""
        info = self.orchestrator.agent(agent_id)
        if info is None:
            return None
        return status_text(
            role,
            agent_id,
            state=info.status,
            elapsed_seconds=info.elapsed_seconds,
            activity=info.activity,
            intro=intro,
        )

    async def follow(
        self,
        thread: ThreadRef,
        agent_id: str,
        role: str,
        *,
        task_slug: str,
        intro: str | None = None,
        drafted_by: str | None = None,
    ) -> DispatchRecord:
        """Shows the agent in the thread until it ends; returns its final record."""
        # One turn of the loop: a freshly drafted agent takes a free slot (running) before
        # its first status is shown, rather than flashing "queued".
        await asyncio.sleep(0)
        shown = self.status(agent_id, role, intro)
        ts = await self.poster.post(thread, shown) if shown else None
        while True:
            try:
                record = await self.orchestrator.wait(agent_id, timeout=self.interval)
                break
            except TimeoutError:
                text = self.status(agent_id, role, intro)
                if ts is not None and text is not None and text != shown:
                    await self.poster.update(thread.channel, ts, text)
                    shown = text
        diff = await self.orchestrator.diff(task_slug, record)
        messages = render_record(
            record,
            task_slug=task_slug,
            stopped_by=self.stopped_by.pop(agent_id, None),
            drafted_by=drafted_by,
            diff=diff,
        )
        await self.poster.replace(thread, ts, messages)
        if diff and not diff_fits_inline(diff):
            await self._upload_diff(thread, task_slug, record, diff)
        return record

    async def _upload_diff(
        self, thread: ThreadRef, task_slug: str, record: DispatchRecord, diff: str
    ) -> None:
        name = diff_file_name(task_slug, record.agent_id)
        where = f"branch {record.branch}" if record.branch else "the task's workspace"
        uploaded = await self.poster.upload(
            thread,
            filename=name,
            content=diff,
            title=f"{record.role} {record.agent_id}: {where}",
            comment=f"The full diff of {where} after {record.role} `{record.agent_id}`.",
        )
        if not uploaded:
            await self.poster.post(
                thread,
                f"The diff could not be attached here. It is kept with the task: "
                f"`harness show {task_slug}` names its file.",
            )
