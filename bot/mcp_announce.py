"""Posting the tasks that ``harness mcp`` starts into Slack, so the team follows them there:
the request as a message in the channel (its thread becomes the task's), and each agent's
result in that thread when it ends, rendered as the bot renders it. The harness reaches this
through the ``harness.announcers`` entry point and never imports it."""

from __future__ import annotations

import logging
from collections.abc import Mapping

from bot.blocks import escape, excerpt, mention, render_record
from bot.poster import CALL_ERRORS, Poster, SlackClient, classify, message_content
from bot.settings import SlackEnv, check_token_shapes
from harness.errors import HarnessError
from harness.tasks.model import DispatchRecord, ThreadRef

logger = logging.getLogger(__name__)

# A request is posted whole up to here; the task keeps all of it.
_POSTED_CHARS = 3_000


def from_environ(environ: Mapping[str, str]) -> SlackAnnouncer | None:
    """An announcer on the bot's token, or None without ``SLACK_BOT_TOKEN``."""
    env = SlackEnv.from_environ(environ)
    if env.bot_token is None:
        return None
    check_token_shapes(env)
    return SlackAnnouncer(SlackClient(token=env.bot_token, base_url=env.api_url))


class SlackAnnouncer:
    def __init__(self, client: SlackClient) -> None:
        self._client = client
        self._poster = Poster(client)

    async def open_thread(
        self, channel: str, thread_ts: str | None, text: str, requester: str
    ) -> ThreadRef:
        said = escape(excerpt(text, _POSTED_CHARS)) if len(text) > _POSTED_CHARS else escape(text)
        line = f"{mention(requester)} asked (through MCP):\n{said}"
        try:
            response = await self._client.chat_postMessage(
                channel=channel, text=line, thread_ts=thread_ts, unfurl_links=False
            )
        except CALL_ERRORS as exc:
            error = classify(exc).error
            raise HarnessError(
                f"Slack refused the post in {channel}: {error}",
                fix="invite the bot to the channel (`/invite @harness`), or check its id"
                if error in ("not_in_channel", "channel_not_found")
                else "try again; `harness doctor` checks the Slack token",
            ) from exc
        return ThreadRef(channel, thread_ts or str(response["ts"]))

    async def post_result(
        self, thread: ThreadRef, task_slug: str, record: DispatchRecord, diff: str | None
    ) -> None:
        for message in render_record(record, task_slug=task_slug, diff=diff):
            await self._client.chat_postMessage(
                channel=thread.channel, thread_ts=thread.thread_ts, **message_content(message)
            )

    async def channels_of(self, user: str) -> frozenset[str] | None:
        return await self._poster.channels_of(user)

    async def close(self) -> None:
        session = getattr(self._client, "session", None)
        if session is not None and not session.closed:
            await session.close()
