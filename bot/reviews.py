"""Reviews of pull requests in Slack: ``@harness review <url>`` (the thread it starts),
``/harness review <url>`` (a thread the bot starts in the channel) and a routine's
``pull_request`` event (a thread in the routine's channel).

The thread says which pull request is reviewed, shows the reviewer at work as any agent's
thread does, and ends with one line: the review's verdict and its link on GitHub (or where
the review of that head already is, or what stopped it and what to do).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

from bot.background import Background
from bot.blocks import escape, failure_message, mention
from bot.conversations import Conversations
from bot.parsing import MentionInUnboundThread, NewTask, UserMessage, review_request
from bot.poster import CALL_ERRORS, Poster
from bot.progress import AgentWatcher
from bot.threads import ThreadIndex
from bot.unrecorded import intake_key
from harness.agents.dispatching import AgentHandle
from harness.agents.reviews import ReviewOutcome, Reviews
from harness.errors import HarnessError
from harness.tasks.model import ThreadRef, Trigger

logger = logging.getLogger(__name__)


class SlackReviews:
    """Starts reviews from Slack and tells their threads how they went."""

    def __init__(
        self, reviews: Reviews, poster: Poster, watcher: AgentWatcher, background: Background
    ) -> None:
        self.reviews = reviews
        self.poster = poster
        self.watcher = watcher
        self.background = background

    async def in_thread(
        self,
        thread: ThreadRef,
        url: str,
        *,
        requested_by: str | None,
        reply_to: str | None = None,
        handles: str | None = None,
        on_task: Callable[[str], None] | None = None,
        head_sha: str | None = None,
        on_reviewer: Callable[[AgentHandle], None] | None = None,
        trigger: Trigger | None = None,
    ) -> ReviewOutcome | None:
        """Reviews the pull request at ``url`` with ``thread`` as its reviewer's thread;
        the outcome, None when it failed (the thread says why). ``on_task``: told the
        reviewer's task once it has one (the thread is then bound to it); ``on_reviewer``:
        told its agent. ``trigger``: the routine's firing that asked."""
        await self.poster.post(thread, f"🔍 Reviewing {escape(url)}…")

        async def follow(handle: AgentHandle) -> None:
            if on_task is not None:
                on_task(handle.task_slug)
            if on_reviewer is not None:
                on_reviewer(handle)
            await self.watcher.follow(
                thread, handle.agent_id, handle.role, task_slug=handle.task_slug,
                reply_to=reply_to, handles=handles, recipient=requested_by,
            )  # fmt: skip

        try:
            outcome = await self.reviews.start_review(
                url, requested_by=requested_by, thread=thread, head_sha=head_sha,
                on_reviewer=follow, trigger=trigger,
            )  # fmt: skip
        except HarnessError as exc:
            what = f"No review of {url}: {exc.message}"
            await self.poster.post(thread, failure_message(what, next_step=exc.fix or "ask again"))
            return None
        mark = ":white_check_mark:" if outcome.kind == "posted" else ":information_source:"
        await self.poster.post(thread, f"{mark} {escape(outcome.line)}")
        return outcome

    def taking(self, index: ThreadIndex) -> Callable[[UserMessage], Awaitable[bool]]:
        """What a conversation asks of a new thread's request: True when it was ``review
        <url>``, reviewed in its thread (bound to the reviewer's task while it has one)."""

        async def take(message: UserMessage) -> bool:
            url = review_request(message.text)
            if url is None:
                return False
            thread = message.thread
            await self.in_thread(
                thread, url, requested_by=message.user, reply_to=message.ts,
                handles=intake_key(message), on_task=lambda slug: index.bind(thread, slug),
            )  # fmt: skip
            index.release(thread)  # no task made: a reply there is a request of its own
            return True

        return take

    async def in_new_thread(
        self, channel: str, url: str, *, requested_by: str | None, why: str
    ) -> ThreadRef | None:
        """Starts a thread in ``channel`` saying ``why`` (who or what asked), and reviews
        there in the background; the thread, None when Slack refused the post."""
        try:
            response = await self.poster.client.chat_postMessage(
                channel=channel, text=why, unfurl_links=False, unfurl_media=False
            )
        except CALL_ERRORS as exc:
            logger.warning("could not start a review thread in %s: %s", channel, exc)
            return None
        ts = response.get("ts")
        if not isinstance(ts, str):
            return None
        thread = ThreadRef(channel, ts)
        self.background.spawn(
            self.in_thread(thread, url, requested_by=requested_by),
            name=f"review of {url}",
        )
        return thread

    async def from_command(self, channel: str, user: str, url: str) -> None:
        """``/harness review <url>``: a thread of its own in ``channel``."""
        why = f"{mention(user)} asked for a review of {escape(url)}"
        if await self.in_new_thread(channel, url, requested_by=user, why=why) is None:
            said = "I could not start a review thread here: invite me to the channel, or ask me "
            await self.poster.ephemeral(channel, user, said + "in a DM (`review <url>`).", None)


class ReviewingConversations(Conversations):
    """The bot's conversations, where a new thread's ``review <url>`` is a review of that
    pull request (``SlackReviews``) instead of a task for a routed role."""

    reviews: SlackReviews | None = None  # set by the app once it is built

    async def _start(
        self,
        decision: NewTask | MentionInUnboundThread,
        bot_user_id: str,
        *,
        repository: str | None = None,
    ) -> None:
        if self.reviews is not None and await self.reviews.taking(self.index)(decision.message):
            return
        await super()._start(decision, bot_user_id, repository=repository)
