"""Posting into Slack threads: the few Web API calls the bot makes, with failures logged
rather than raised (a lost status edit must never stop an agent's result from arriving).

Rate limits are handled by the client's retry handler (see bot.app.make_client). The poster
also remembers the newest message it knows of in each thread, so a status message is
replaced in place only when nothing came after it; otherwise the result is posted at the
end of the thread, where people read.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

import aiohttp
from slack_sdk.errors import SlackApiError, SlackClientError
from slack_sdk.web.async_client import AsyncWebClient

from bot.blocks import SlackMessage
from harness.results import ThreadRef

logger = logging.getLogger(__name__)

# What a failed call can raise: Slack errors, transport errors, timeouts.
CALL_ERRORS = (SlackApiError, SlackClientError, aiohttp.ClientError, TimeoutError, OSError)


def ts_key(ts: str) -> tuple[int, int]:
    whole, _, frac = ts.partition(".")
    try:
        return int(whole or 0), int((frac + "000000")[:6] or 0)
    except ValueError:
        return 0, 0


def _content(message: SlackMessage | str) -> dict[str, Any]:
    if isinstance(message, str):
        return {"text": message}
    return {"text": message["text"], "blocks": message["blocks"]}


class Poster:
    def __init__(self, client: AsyncWebClient) -> None:
        self.client = client
        self._newest: dict[ThreadRef, str] = {}

    # -- what is the newest message of a thread

    def note(self, thread: ThreadRef, ts: str) -> None:
        newest = self._newest.get(thread)
        if newest is None or ts_key(ts) > ts_key(newest):
            self._newest[thread] = ts

    def is_newest(self, thread: ThreadRef, ts: str) -> bool:
        return self._newest.get(thread, ts) == ts

    # -- calls

    async def post(self, thread: ThreadRef, message: SlackMessage | str) -> str | None:
        """Posts into the thread; the new message's ts, or None when Slack refused it."""
        try:
            response = await self.client.chat_postMessage(
                channel=thread.channel,
                thread_ts=thread.thread_ts,
                unfurl_links=False,
                unfurl_media=False,
                **_content(message),
            )
        except CALL_ERRORS as exc:
            logger.warning("chat.postMessage to %s failed: %s", thread.channel, exc)
            return None
        ts = response.get("ts")
        if isinstance(ts, str):
            self.note(thread, ts)
            return ts
        return None

    async def update(self, channel: str, ts: str, message: SlackMessage | str) -> bool:
        try:
            await self.client.chat_update(channel=channel, ts=ts, **_content(message))
        except CALL_ERRORS as exc:
            logger.warning("chat.update of %s in %s failed: %s", ts, channel, exc)
            return False
        return True

    async def delete(self, channel: str, ts: str) -> bool:
        try:
            await self.client.chat_delete(channel=channel, ts=ts)
        except CALL_ERRORS as exc:
            logger.warning("chat.delete of %s in %s failed: %s", ts, channel, exc)
            return False
        return True

    async def react(self, channel: str, ts: str, name: str) -> None:
        try:
            await self.client.reactions_add(channel=channel, timestamp=ts, name=name)
        except SlackApiError as exc:
            if exc.response.get("error") != "already_reacted":
                logger.warning("reactions.add :%s: failed: %s", name, exc)
        except CALL_ERRORS as exc:
            logger.warning("reactions.add :%s: failed: %s", name, exc)

    async def upload(
        self, thread: ThreadRef, *, filename: str, content: str, title: str, comment: str
    ) -> bool:
        """Uploads ``content`` as a file shared in the thread; False when Slack refused it."""
        try:
            await self.client.files_upload_v2(
                channel=thread.channel,
                thread_ts=thread.thread_ts,
                filename=filename,
                content=content.encode("utf-8"),
                title=title,
                initial_comment=comment,
                snippet_type="diff",
            )
        except CALL_ERRORS as exc:
            logger.warning("uploading %s to %s failed: %s", filename, thread.channel, exc)
            return False
        return True

    async def ephemeral(self, channel: str, user: str, text: str, thread_ts: str | None) -> None:
        try:
            await self.client.chat_postEphemeral(
                channel=channel, user=user, text=text, thread_ts=thread_ts
            )
        except CALL_ERRORS as exc:
            logger.warning("chat.postEphemeral to %s failed: %s", user, exc)

    async def replies(self, thread: ThreadRef, limit: int = 1000) -> list[Mapping[str, Any]]:
        """The thread's messages, parent first (the first page: the newest context matters)."""
        try:
            response = await self.client.conversations_replies(
                channel=thread.channel, ts=thread.thread_ts, limit=limit
            )
        except CALL_ERRORS as exc:
            logger.warning("conversations.replies of %s failed: %s", thread, exc)
            return []
        messages = response.get("messages")
        return [m for m in messages if isinstance(m, dict)] if isinstance(messages, list) else []

    async def permalink(self, thread: ThreadRef) -> str | None:
        try:
            response = await self.client.chat_getPermalink(
                channel=thread.channel, message_ts=thread.thread_ts
            )
        except CALL_ERRORS as exc:
            logger.debug("chat.getPermalink of %s failed: %s", thread, exc)
            return None
        link = response.get("permalink")
        return link if isinstance(link, str) else None

    async def replace(
        self, thread: ThreadRef, ts: str | None, messages: Sequence[SlackMessage]
    ) -> None:
        """Puts ``messages`` where the status message ``ts`` was: in place when it is still
        the newest in the thread, else at the end of the thread (the status is removed)."""
        first, rest = messages[0], messages[1:]
        placed = False
        if ts is not None and self.is_newest(thread, ts):
            placed = await self.update(thread.channel, ts, first)
        elif ts is not None and not await self.delete(thread.channel, ts):
            await self.update(thread.channel, ts, "(the result is further down)")
        if not placed:
            await self.post(thread, first)
        for message in rest:
            await self.post(thread, message)
