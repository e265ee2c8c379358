"""The App Home tab: each person's view of the bot (``views.publish`` on ``app_home_opened``,
published again as agents come and go).

It shows the running and queued agents with a *Kill* button each (the click is checked like
``/harness kill``), the approvals and questions waiting on this person with links to their
threads, and the recent tasks with their status, branch and cost. ``render_home`` is pure; the
``HomeTab`` gathers what it shows and publishes it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from slack_sdk.web.async_client import AsyncWebClient

from bot.background import Background
from bot.blocks import STATUS_EMOJI, escape, excerpt
from bot.poster import CALL_ERRORS, Poster, classify
from bot.spend_home import spend_blocks
from bot.visibility import visible_tasks
from harness.agents.events import AgentEvent
from harness.agents.orchestrator import Orchestrator
from harness.agents.pool import AgentInfo
from harness.agents.questions import Question
from harness.agents.spend_limits import earliest_day
from harness.config.settings import SlackSettings
from harness.errors import HarnessError
from harness.tasks.model import PullRequest, Task, TaskSummary

logger = logging.getLogger(__name__)

KILL_ACTION = "home_kill"
View = dict[str, Any]
_REFRESH_SECONDS = 1.0  # at most one republish per second, however busy the agents are


@dataclass(frozen=True)
class TaskLine:
    """A recent task as the home tab shows it."""

    slug: str
    description: str
    status: str
    branch: str | None
    cost_usd: float | None
    link: str | None
    cost_simulated: bool = False  # it came from a scripted model
    pull_request: PullRequest | None = None


def task_line(task: Task, link: str | None) -> TaskLine:
    branch = next((d.branch for d in reversed(task.dispatches) if d.branch), None)
    summary = TaskSummary.of(task)
    return TaskLine(task.slug, task.description, summary.status, branch, summary.cost_usd, link,
                    summary.cost_simulated, task.pull_request)  # fmt: skip


def _section(text: str, accessory: dict[str, Any] | None = None) -> dict[str, Any]:
    block: dict[str, Any] = {"type": "section", "text": {"type": "mrkdwn", "text": text}}
    if accessory is not None:
        block["accessory"] = accessory
    return block


def _header(text: str) -> dict[str, Any]:
    return {"type": "header", "text": {"type": "plain_text", "text": text}}


def render_home(
    agents: Sequence[AgentInfo],
    waiting: Sequence[tuple[Question, str | None]],
    tasks: Sequence[TaskLine],
) -> View:
    """The home view: live agents with kill buttons, what waits on this person (each with
    its thread's link), recent tasks with their status, branch and cost."""
    blocks: list[dict[str, Any]] = [_header("Agents at work")]
    if not agents:
        blocks.append(_section("No agents are running or queued."))
    for a in sorted(agents, key=lambda a: (a.status == "queued", -a.elapsed_seconds)):
        where = f" on worker `{escape(a.worker)}`" if a.worker else ""
        text = (
            f"{STATUS_EMOJI[a.status]} *{escape(a.role)}* `{escape(a.agent_id)}` · task "
            f"`{escape(a.task_slug)}` · {int(a.elapsed_seconds)} s · "
            f"{escape(excerpt(a.activity, 60))}{where}"
        )
        kill = {"type": "button", "action_id": KILL_ACTION, "style": "danger",
                "text": {"type": "plain_text", "text": "Kill"}, "value": a.agent_id}  # fmt: skip
        blocks.append(_section(text, kill))
    blocks += [{"type": "divider"}, _header("Waiting on you")]
    if not waiting:
        blocks.append(_section("Nothing is waiting on you."))
    for question, link in waiting:
        what = "approve" if question.kind == "approval" else "answer"
        where = f"<{link}|in its thread>" if link else f"in task `{escape(question.task_slug)}`"
        blocks.append(_section(f"*{what}*: {escape(excerpt(question.text, 200))} — {where}"))
    blocks += [{"type": "divider"}, _header("Recent tasks")]
    if not tasks:
        blocks.append(_section("No tasks yet. Message me to start one."))
    for t in tasks:
        title = f"<{t.link}|{escape(t.slug)}>" if t.link else f"`{escape(t.slug)}`"
        parts = [title, escape(excerpt(t.description, 80)), t.status]
        if t.branch:
            parts.append(f"branch `{escape(t.branch)}`")
        if t.pull_request is not None:
            pull = t.pull_request
            checks = f" (checks {pull.checks})" if pull.checks != "unknown" else ""
            parts.append(f"<{pull.url}|pull request #{pull.number}>{checks}")
        if t.cost_usd is not None:
            parts.append(f"${t.cost_usd:.2f}" + (" (simulated)" if t.cost_simulated else ""))
        blocks.append(_section(" · ".join(parts)))
    return {"type": "home", "blocks": blocks}


def waiting_on(
    user: str,
    questions: Sequence[Question],
    may_decide: Callable[[str, str | None], bool],
) -> list[Question]:
    """The questions ``user`` is the one to answer: their own tasks' questions, and the
    approvals they may give (their tasks', or every task's for an admin)."""
    mine = []
    for q in questions:
        if (q.kind == "approval" and may_decide(user, q.requester)) or (
            q.kind != "approval" and q.requester == user
        ):
            mine.append(q)
    return mine


class HomeTab:
    def __init__(
        self,
        client: AsyncWebClient,
        orchestrator: Orchestrator,
        poster: Poster,
        background: Background,
        *,
        settings: SlackSettings,
        recent: int = 10,
    ) -> None:
        self.client = client
        self.orchestrator = orchestrator
        self.poster = poster
        self.background = background
        self.settings = settings
        self.recent = recent
        # People who opened the tab since the bot started: their view follows the agents.
        self.viewers: set[str] = set()
        # Sections shown below the rest for a person (the routines, when there are some).
        self.more: Callable[[str], Awaitable[Sequence[dict[str, Any]]]] | None = None
        self._refresh_due = False
        orchestrator.subscribe(self._on_agent_event)
        orchestrator.pull_requests.subscribe(lambda _event: self.changed())

    async def publish(self, user: str) -> None:
        self.viewers.add(user)
        try:
            view = await self._view(user)
            await self.client.views_publish(user_id=user, view=view)
        except CALL_ERRORS as exc:
            logger.warning("home tab of %s not published: %s", user, classify(exc).error)

    async def _view(self, user: str) -> View:
        questions = self.orchestrator.humans.pending_questions()
        mine = waiting_on(user, questions, self.orchestrator.humans.may_decide)
        links = await asyncio.gather(*(self._link(q.task_slug) for q in mine))
        summaries = await visible_tasks(
            user, await self.orchestrator.tasks.task_summaries(), self.orchestrator, self.poster
        )
        summaries = summaries[: self.recent]
        tasks: list[TaskLine] = []
        for summary in summaries:
            with contextlib.suppress(HarnessError):  # a damaged task is listed elsewhere
                task = await self.orchestrator.tasks.task(summary.slug)
                link = await self.poster.permalink(task.thread) if task.thread else None
                tasks.append(task_line(task, link))
        waiting = list(zip(mine, links, strict=True))
        view = render_home(self.orchestrator.agents(), waiting, tasks)
        view["blocks"] += await self._spend(user)
        if self.more is not None:
            view["blocks"] += await self.more(user)
        return view

    async def _spend(self, user: str) -> list[dict[str, Any]]:
        """This person's spend against their limits (an admin's: the team's too)."""
        now = self.orchestrator.clock.now()
        rows = await self.orchestrator.tasks.spending(earliest_day(now))
        limits = self.orchestrator.config.limits
        return spend_blocks(user, rows, limits, now, admin=user in self.settings.admins)

    async def _link(self, task_slug: str) -> str | None:
        try:
            task = await self.orchestrator.tasks.task(task_slug)
        except HarnessError:
            return None
        return await self.poster.permalink(task.thread) if task.thread else None

    def _on_agent_event(self, event: AgentEvent) -> None:
        self.changed()

    def changed(self) -> None:
        """Something the tabs show changed: republish them (soon, once for a burst)."""
        if self.viewers and not self._refresh_due:
            self._refresh_due = True
            self.background.spawn(self._refresh(), name="refresh home tabs")

    async def _refresh(self) -> None:
        await asyncio.sleep(_REFRESH_SECONDS)  # gathers a burst of agent events into one
        self._refresh_due = False
        for user in sorted(self.viewers):
            await self.publish(user)
