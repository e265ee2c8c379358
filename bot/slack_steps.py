"""How each step of an outbox entry (``bot/outbox_steps.py``) is made in Slack: a post
carries its key and, when tried before, is looked for in the thread first; a message that
is gone or can no longer be edited is posted instead; what cannot be undone twice (a
reaction there already, a message deleted already) is taken as done. Failures come out as
``DeliveryError`` (transient or not) for the outbox to retry or give up on."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Awaitable, Callable
from typing import Any

import aiohttp
from slack_sdk.errors import SlackApiError, SlackClientError
from slack_sdk.web.async_client import AsyncWebClient

from bot.blocks import SlackMessage
from bot.outbox_steps import Step, UploadStep
from bot.poster import DeliveryError, Poster, classify, message_content, post_keyed
from harness.tasks.model import ThreadRef

logger = logging.getLogger(__name__)

# A status message that is gone or can no longer be edited: post the result instead.
MESSAGE_GONE = frozenset({"message_not_found", "cant_update_message", "edit_window_closed"})


class SlackSteps:
    def __init__(
        self,
        client: AsyncWebClient,
        poster: Poster,
        read_diff: Callable[[str, str], Awaitable[str | None]],
    ) -> None:
        self.client = client
        self.poster = poster
        self._read_diff = read_diff

    async def do(self, thread: ThreadRef, step: Step, key: str, retried: bool) -> None:
        """One step; a post carries ``key``, looked for in the thread first when ``retried``."""
        if step["op"] == "post":
            await self._post(thread, step["message"], key, retried)
        elif step["op"] == "update":
            await self._update(thread, step["ts"], step["message"], key, retried)
        elif step["op"] == "stop_stream":
            try:
                await self._call(self.client.chat_stopStream, channel=thread.channel,
                                 ts=step["ts"], blocks=step["message"]["blocks"],
                                 session_status=step.get("session_status"))  # fmt: skip
            except DeliveryError as exc:
                if exc.transient:
                    raise
                logger.info("stream %s not stopped (%s): edited instead", step["ts"], exc.error)
                await self._update(thread, step["ts"], step["message"], key, retried)
        elif step["op"] == "delete":
            try:
                await self._call(self.client.chat_delete, channel=thread.channel, ts=step["ts"])
            except DeliveryError as exc:
                if exc.transient:
                    raise
                if exc.error in MESSAGE_GONE:
                    return
                with contextlib.suppress(DeliveryError):
                    await self._call(
                        self.client.chat_update,
                        channel=thread.channel,
                        ts=step["ts"],
                        text="(the result is further down)",
                    )
        elif step["op"] == "react":
            removing = step.get("remove", False)
            try:
                await self._call(
                    self.client.reactions_remove if removing else self.client.reactions_add,
                    channel=step["channel"],
                    timestamp=step["ts"],
                    name=step["name"],
                )
            except DeliveryError as exc:
                if exc.transient:
                    raise
                # Already there (or already gone), or the message is gone: nothing is owed.
                logger.info("reaction :%s: not %s: %s", step["name"],
                            "removed" if removing else "added", exc.error)  # fmt: skip
        else:
            await self._upload(thread, step, key, retried)

    async def _update(
        self, thread: ThreadRef, ts: str, message: SlackMessage | str, key: str, retried: bool
    ) -> None:
        try:
            await self._call(self.client.chat_update, channel=thread.channel, ts=ts,
                             **message_content(message))  # fmt: skip
        except DeliveryError as exc:
            if exc.transient or exc.error not in MESSAGE_GONE:
                raise
            await self._post(thread, message, key, retried)

    async def _post(
        self, thread: ThreadRef, message: SlackMessage | str, key: str, retried: bool
    ) -> None:
        response = await self._call(
            post_keyed, self.client, thread, message, key=key, look_first=retried
        )
        ts = response.get("ts")
        if isinstance(ts, str):
            self.poster.note(thread, ts)

    async def _upload(self, thread: ThreadRef, step: UploadStep, key: str, retried: bool) -> None:
        diff = await self._read_diff(step["task_slug"], step["agent_id"])
        try:
            if diff is None:
                raise DeliveryError("the kept diff is missing", transient=False)
            await self._call(
                self.client.files_upload_v2,
                channel=thread.channel,
                thread_ts=thread.thread_ts,
                filename=step["filename"],
                content=diff.encode("utf-8"),
                title=step["title"],
                initial_comment=step["comment"],
                snippet_type="diff",
            )
        except DeliveryError as exc:
            if exc.transient:
                raise
            logger.warning("uploading %s to %s failed: %s", step["filename"], thread, exc.error)
            await self._post(
                thread,
                f"The diff could not be attached here ({exc.error}). It is kept with the task: "
                f"`harness show {step['task_slug']}` names its file.",
                key,
                retried,
            )

    @staticmethod
    async def _call(method: Callable[..., Awaitable[Any]], *args: Any, **kwargs: Any) -> Any:
        try:
            return await method(*args, **kwargs)
        except (SlackApiError, SlackClientError, aiohttp.ClientError, TimeoutError, OSError) as e:
            raise classify(e) from e
