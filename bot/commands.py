"""``/harness list | kill <agentId> | tasks | connect github | disconnect github | memory |
help``: acked at once, work done after (connect and disconnect: ``forge_commands.py``;
memory: ``memory.py``).

Answers are ephemeral (only the person who typed the command sees them). ``kill`` is allowed
to the task's requester and to the admins in config.slack.admins (the core decides); the
agent's thread then says who stopped it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from slack_bolt.context.ack.async_ack import AsyncAck
from slack_bolt.context.respond.async_respond import AsyncRespond

from bot.access import check_access
from bot.background import Background
from bot.blocks import STATUS_EMOJI, escape, excerpt, mention
from bot.forge_commands import ForgeCommands
from bot.home import HomeTab
from bot.memory import SlackMemory
from bot.parsing import BadCommand, parse_command
from bot.poster import CALL_ERRORS, Poster
from bot.progress import AgentWatcher
from bot.reviews import SlackReviews
from bot.routine_views import RoutineViews
from bot.sessions import stop_agent
from bot.settings import BotOptions
from bot.visibility import visible_tasks
from harness.agents.metadata import FieldValue
from harness.agents.orchestrator import Orchestrator
from harness.agents.pool import AgentInfo
from harness.agents.visibility import is_direct_message
from harness.config.settings import SlackSettings
from harness.errors import HarnessError
from harness.tasks.model import TaskSummary
from harness.tasks.store import DamagedTask

logger = logging.getLogger(__name__)

# Damaged tasks named one by one in `/harness tasks`; `harness tasks` lists them all.
_DAMAGED_SHOWN = 10

# How long a command answered in its ack may take (Slack gives up on an ack after 3 s).
ACK_WITHIN = 2.5
# How long `kill` waits for the core to have stopped the agent before it answers "Stopping".
_STOP_ANSWERED_WITHIN = 0.5
# Bot replicas: the agent is another process's, which did not take the command, or which
# stopped and whose agents another is taking over (seconds); "no such agent" would be untrue.
HELD_ELSEWHERE = (
    "`{agent}` was started by another bot process, which did not take the command (it may "
    "have stopped, and its agents are being taken over): try `/harness kill {agent}` again "
    "in a few seconds."
)

HELP = (
    "*/harness*: the agents working on your tasks\n"
    "• `/harness list`: running and queued agents (role, task, elapsed time, metadata)\n"
    "• `/harness kill <agentId>`: stop an agent (for the person who asked, and admins)\n"
    "• `/harness tasks`: recent tasks, with links to their threads\n"
    "• `/harness connect github`: link your GitHub account, so your pull requests are "
    "opened as you\n"
    "• `/harness disconnect github`: unlink it (the bot opens your pull requests again)\n"
    "• `/harness review <pull request URL>`: review it; the findings are posted on GitHub as "
    "one review (as you, when you linked your account), its link in a thread here\n"
    "• `/harness memory`: the notes every agent in this channel (and its repository) gets, "
    "with Remove; add one with `@harness remember <note>` (`remember repo:<name> <note>`)\n"
    "• `/harness routines`: the routines (schedules, GitHub events, calls), with Run now and "
    "Pause for their owners and the admins\n"
    "• `/harness help`: this help\n"
    "Start a task by messaging me directly or by @mentioning me in a channel; reply in the "
    "task's thread to follow up."
)


# ------------------------------------------------------------------ pure views


def _value(field: FieldValue) -> str:
    if field.error is not None:
        return "(unavailable)"
    return excerpt(str(field.value), 60) if field.value is not None else "-"


def render_agent_list(
    agents: Sequence[AgentInfo],
    metadata: Mapping[str, Mapping[str, FieldValue]],
    list_fields: Sequence[str],
) -> str:
    """One line per live agent; ``metadata`` is keyed by the agent's cwd."""
    if not agents:
        return "No agents are running or queued."
    queued = sum(1 for a in agents if a.status == "queued")
    lines = [f"*Agents*: {len(agents) - queued} running, {queued} queued"]
    for a in sorted(agents, key=lambda a: (a.status == "queued", -a.elapsed_seconds)):
        parts = [
            f"{STATUS_EMOJI[a.status]} *{escape(a.role)}* `{escape(a.agent_id)}`",
            f"task `{escape(a.task_slug)}`",
            f"{int(a.elapsed_seconds)} s",
            escape(excerpt(a.activity, 50)),
        ]
        if a.parent_id:
            parts.append(f"drafted by `{escape(a.parent_id)}`")
        if a.worker:
            parts.append(f"on worker `{escape(a.worker)}`")
        values = metadata.get(a.cwd, {})
        parts += [
            f"{escape(name)}: {escape(_value(values[name]))}"
            for name in list_fields
            if name in values
        ]
        lines.append("• " + " · ".join(parts))
    return "\n".join(lines)


def render_task_list(
    tasks: Sequence[TaskSummary],
    links: Mapping[str, str],
    damaged: Sequence[DamagedTask] = (),
) -> str:
    if not tasks and not damaged:
        return (
            "No tasks of yours or of your channels yet. Message me, or @mention me in a "
            "channel, to start one."
        )
    if not tasks:
        return render_damaged(damaged)
    lines = ["*Recent tasks*"]
    for task in tasks:
        name = f"`{escape(task.slug)}`"
        link = links.get(task.slug)
        title = f"<{link}|{escape(task.slug)}>" if link else name
        parts = [title, escape(excerpt(task.description, 80))]
        count = task.dispatch_count
        parts.append(f"{count} dispatch{'es' if count != 1 else ''}")
        if task.last_role is not None:
            parts.append(f"last: {escape(task.last_role)} {task.last_status}")
        lines.append("• " + " · ".join(parts))
    if damaged:
        lines += ["", render_damaged(damaged)]
    return "\n".join(lines)


def render_damaged(damaged: Sequence[DamagedTask]) -> str:
    """How many tasks could not be read, why, and the command that repairs each."""
    count = len(damaged)
    its, it = ("its", "it") if count == 1 else ("their", "each")
    lines = [
        f"⚠️ *{count} task{'' if count == 1 else 's'} could not be read*: {its} task.json is "
        f"damaged. To repair {it}, run the command shown on the bot's machine; it keeps the "
        "damaged file aside and writes a fresh one with everything that still reads."
    ]
    for task in damaged[:_DAMAGED_SHOWN]:
        problem = escape(excerpt(task.problem, 200))
        lines.append(f"• `{escape(task.slug)}` ({problem}): `{escape(task.repair)}`")
    if count > _DAMAGED_SHOWN:
        lines.append(f"…and {count - _DAMAGED_SHOWN} more: `harness tasks` lists them all.")
    return "\n".join(lines)


# ------------------------------------------------------------------ the command


class Commands:
    def __init__(
        self,
        orchestrator: Orchestrator,
        poster: Poster,
        watcher: AgentWatcher,
        background: Background,
        *,
        settings: SlackSettings,
        options: BotOptions,
    ) -> None:
        self.orchestrator = orchestrator
        self.poster = poster
        self.watcher = watcher
        self.background = background
        self.settings = settings
        self.options = options
        self.forges = ForgeCommands(orchestrator.accounts, poster, background, within=ACK_WITHIN)
        self.reviews: SlackReviews | None = None  # `/harness review <url>`, set by the app
        self.routines: RoutineViews | None = None  # `/harness routines`, set when there are some
        self.home: HomeTab | None = None  # the App Home tab, set by the app
        self.memory: SlackMemory | None = None  # `/harness memory`, set by the app

    async def handle(self, ack: AsyncAck, respond: AsyncRespond, command: Mapping[str, Any]) -> str:
        """Answers the command; returns what was done, in a few words, for the request log."""
        user = str(command.get("user_id") or "")
        channel = str(command.get("channel_id") or "")
        refusal = check_access(self.settings, user, channel, is_dm=is_direct_message(channel))
        if refusal is not None:
            await ack(text=refusal.text)
            return "refused: not allowed"
        if self.routines is not None and str(command.get("text") or "").split()[:1] == ["routines"]:
            await ack(**await self.routines.answer(user))
            return "routines"
        parsed = parse_command(str(command.get("text") or ""))
        if isinstance(parsed, BadCommand):
            await ack(text=f"{parsed.message}\n\n{HELP}")
            return "bad input, answered with the help"
        if parsed.name == "help":
            await ack(text=HELP)
        elif parsed.name == "memory":
            listing = await self.memory.answer(user, channel) if self.memory else None
            await ack(**(listing or {"text": "Memory is not set up on this bot."}))
        elif parsed.name == "kill" and parsed.agent_id is not None:
            answer, outcome = await self.kill(parsed.agent_id, user)
            await ack(text=answer)
            return f"kill {parsed.agent_id}: {outcome}"
        elif parsed.name == "review" and parsed.url is not None:
            if self.reviews is None:
                await ack(text="Reviews of pull requests are not set up on this bot.")
                return "review: not set up"
            await ack(text=f"Starting a review of {escape(parsed.url)} in a thread here.")
            self.background.spawn(self.reviews.from_command(channel, user, parsed.url),
                                  name="review")  # fmt: skip
            return "review"
        elif parsed.name in ("connect", "disconnect"):
            can_respond = bool(command.get("response_url"))
            return await self.forges.handle(
                parsed.name, user, channel, ack, respond, can_respond=can_respond
            )
        elif not command.get("response_url"):
            # Nowhere to answer later (Slack sends a response_url with commands, a proxy or a
            # test client may not): the answer goes in the ack, which Slack waits 3 s for.
            await ack(text=await self._answer(parsed.name, user, within=ACK_WITHIN))
        else:
            await ack()
            text = await self._answer(parsed.name, user)
            try:
                await respond(text=text, response_type="ephemeral")
            except CALL_ERRORS as exc:
                logger.warning("could not answer /harness %s: %s", parsed.name, exc)
        return parsed.name

    async def _answer(self, name: str, user: str, within: float | None = None) -> str:
        """The answer to ``list`` or ``tasks``; an apology when it fails or takes longer
        than ``within`` seconds."""
        try:
            async with asyncio.timeout(within):
                return await (self._list() if name == "list" else self._tasks(user))
        except TimeoutError:
            logger.warning("/harness %s took longer than %s s: answered without it", name, within)
            return "Sorry, that took too long to gather; try again in a moment."
        except Exception:  # the top of a command's work: the person must hear back
            logger.exception("/harness %s failed", name)
            return "Sorry, that did not work; an admin can find the details in the bot's log."

    async def kill(self, agent_id: str, user: str, via: str = "/harness kill") -> tuple[str, str]:
        """Asks the core to stop the agent for ``user`` and answers at once (the answer is the
        ack); the answer, and the outcome in a few words."""
        entry = self.orchestrator.agent(agent_id)
        if entry is None and await self._unfinished_elsewhere(agent_id):
            return HELD_ELSEWHERE.format(agent=agent_id), "held by another replica"
        if entry is None:
            return (
                f"No running or queued agent `{agent_id}`: it may have finished already. "
                "`/harness list` shows the live agents.",
                "no such live agent",
            )
        reason = f"stopped from Slack by {user} with {via}"
        stopping = self.background.spawn(
            stop_agent(self.orchestrator, self.watcher, agent_id, reason, user),
            name=f"kill {agent_id}",
        )
        # The core decides who may stop, and refuses before it stops anything: a refusal is
        # back at once. A stop that takes longer goes on in the background; the agent's
        # thread says when it has stopped.
        await asyncio.wait({stopping}, timeout=_STOP_ANSWERED_WITHIN)
        refused = stopping.result() if stopping.done() and not stopping.exception() else None
        if refused is not None:
            requester = refused.requester
            who = f"the person who asked for it ({mention(requester)})" if requester else "nobody"
            return (
                f"You can't stop `{agent_id}`: only {who} and the bot's admins can stop the "
                f"agents of task `{escape(entry.task_slug)}`.",
                "refused, not the requester or an admin",
            )
        return (
            f"Stopping {escape(entry.role)} `{agent_id}`; its thread will say when it has stopped.",
            "stopping",
        )

    async def _unfinished_elsewhere(self, agent_id: str) -> bool:
        try:
            return await self.orchestrator.tasks.agent_unfinished_elsewhere(agent_id)
        except HarnessError as exc:  # the store out of reach: answered from this process
            logger.warning("kill %s: could not read its record: %s", agent_id, exc)
            return False

    async def _list(self) -> str:
        agents = self.orchestrator.agents()
        values = await self.orchestrator.metadata.collect_many(Path(a.cwd) for a in agents)
        fields = [f.name for f in self.orchestrator.metadata.fields if f.include_in_list]
        return render_agent_list(agents, {str(k): v for k, v in values.items()}, fields)

    async def _tasks(self, user: str) -> str:
        summaries = await self.orchestrator.tasks.task_summaries()
        tasks = await visible_tasks(user, summaries, self.orchestrator, self.poster)
        tasks = tasks[: self.options.recent_tasks]
        bound = [t for t in tasks if t.thread is not None]
        found = await asyncio.gather(*(self.poster.permalink(t.thread) for t in bound if t.thread))
        links = {t.slug: link for t, link in zip(bound, found, strict=True) if link}
        return render_task_list(tasks, links, await self.orchestrator.tasks.damaged_tasks())
