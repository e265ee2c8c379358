"""A Slack emulator on loopback: Web API, signed HTTP event delivery and Socket Mode.

Tests and `make demo` point the real slack_bolt `AsyncApp` / slack_sdk `AsyncWebClient` at
`SlackEmulator.api_url`, drive simulated users (`user_message`, `slash_command`,
`block_action`) and observe what the bot did (`calls`, `thread`, `reactions`, `ephemeral`)
with bounded waits (`wait_for`, `wait_for_call`). It is a server: it never imports slack_*.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import json
import logging
import threading
import time
import uuid
from collections.abc import Callable, Coroutine, Iterator, Sequence
from typing import Any, TypeVar
from urllib.parse import urlencode

import aiohttp

from bot.testing.slack_agent_api import Stream
from bot.testing.slack_agent_users import AgentSurfaceUsers
from bot.testing.slack_api import user_record
from bot.testing.slack_model import (
    JSON,
    ApiCall,
    DeliveredEvent,
    channel_type_of,
    sign,
    transcript_line,
)
from bot.testing.slack_payloads import (
    block_actions,
    changed_event,
    deleted_event,
    envelope,
    event_callback,
    mention_event,
    message_event,
    new_id,
    slash_fields,
)

__all__ = ["ApiCall", "DeliveredEvent", "SlackEmulator", "Stream", "transcript_line"]

logger = logging.getLogger(__name__)
T = TypeVar("T")
FORM = "application/x-www-form-urlencoded"


class SlackEmulator(AgentSurfaceUsers):
    """Loopback Slack. Use `async with SlackEmulator(...) as slack:` or `with s.in_thread():`.

    Constructor: see `EmulatorServer.__init__` (tokens, ids, `bot_url`, `delivery`, `port`).
    """

    @contextlib.contextmanager
    def in_thread(self) -> Iterator[SlackEmulator]:
        """Runs the emulator on its own loop in a daemon thread, for synchronous callers.

        Use `call(coro)` to run the async helpers there; observation methods are safe to call.
        """
        loop = asyncio.new_event_loop()
        thread = threading.Thread(target=loop.run_forever, name="slack-emulator", daemon=True)
        thread.start()
        self._thread_loop, self._thread_id = loop, thread.ident
        try:
            self.call(self.start())
            yield self
        finally:
            try:
                self.call(self.stop())
            finally:
                loop.call_soon_threadsafe(loop.stop)
                thread.join(10)
                loop.close()
                self._thread_loop = self._thread_id = None

    def call(self, coro: Coroutine[Any, Any, T], timeout: float | None = 60.0) -> T:
        """Runs a coroutine on the emulator's thread loop (inside `in_thread()`) and waits."""
        if self._thread_loop is None:
            coro.close()
            raise RuntimeError("SlackEmulator.call() works inside `with emulator.in_thread():`")
        return asyncio.run_coroutine_threadsafe(coro, self._thread_loop).result(timeout)

    def _read(self, fn: Callable[[], T]) -> T:
        if self._thread_loop is None or threading.get_ident() == self._thread_id:
            return fn()

        async def run() -> T:
            return fn()

        return self.call(run(), timeout=10.0)

    # ------------------------------------------------------------------ delivery

    async def post_signed(
        self,
        body: bytes,
        *,
        content_type: str,
        signature_override: str | None = None,
        timestamp_override: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> tuple[int, str]:
        """POSTs a raw body to `bot_url`, signed like Slack (unless overridden)."""
        if self._session is None or not self.bot_url:
            raise RuntimeError("post_signed needs a started emulator and a bot_url")
        timestamp = timestamp_override or str(int(time.time()))
        signature = signature_override or sign(self.identity.signing_secret, timestamp, body)
        all_headers = {
            "Content-Type": content_type,
            "X-Slack-Request-Timestamp": timestamp,
            "X-Slack-Signature": signature,
            **(headers or {}),
        }
        async with self._session.post(self.bot_url, data=body, headers=all_headers) as resp:
            return resp.status, await resp.text()

    async def _deliver(
        self,
        kind: str,
        payload: JSON,
        *,
        event_id: str | None = None,
        retry_num: int = 0,
        retry_reason: str | None = None,
    ) -> DeliveredEvent:
        delivered = DeliveredEvent(kind, payload, event_id=event_id, retry_num=retry_num)
        if self.delivery == "http":
            if kind == "events_api":
                body, ctype = json.dumps(payload).encode(), "application/json"
            elif kind == "slash_commands":
                body, ctype = urlencode(payload).encode(), FORM
            else:
                body, ctype = urlencode({"payload": json.dumps(payload)}).encode(), FORM
            headers = {}
            if retry_num:
                headers["X-Slack-Retry-Num"] = str(retry_num)
                headers["X-Slack-Retry-Reason"] = retry_reason or "http_timeout"
            try:
                delivered.status, delivered.body = await self.post_signed(
                    body, content_type=ctype, headers=headers
                )
            except (aiohttp.ClientError, TimeoutError) as exc:
                logger.warning("Slack emulator: delivery to %s failed: %r", self.bot_url, exc)
                delivered.body = repr(exc)
        elif self.delivery == "socket":
            reason = (retry_reason or "timeout") if retry_num else ""
            env = envelope(kind, payload, retry_attempt=retry_num, retry_reason=reason)
            delivered.envelope_id = env["envelope_id"]
            delivered.ack = await self._send_envelope(env)
        self._deliveries.append(delivered)
        await self._changed()
        return delivered

    async def _send_envelope(self, env: JSON) -> JSON | None:
        try:
            sock = await self.wait_for(self._live_socket, timeout=self.connect_timeout)
        except TimeoutError:
            message = f"no Socket Mode connection to deliver to in {self.connect_timeout}s"
            raise TimeoutError(message) from None
        waiter: asyncio.Future[JSON] = asyncio.get_running_loop().create_future()
        self._ack_waiters[env["envelope_id"]] = waiter
        try:
            await sock.ws.send_json(env)
            return await asyncio.wait_for(waiter, self.ack_timeout)
        except (TimeoutError, ConnectionError) as exc:
            logger.warning("Slack emulator: envelope %s not acked: %r", env["envelope_id"], exc)
            return None
        finally:
            self._ack_waiters.pop(env["envelope_id"], None)

    async def disconnect_socket(self, reason: str = "refresh_requested") -> None:
        """Asks the connected Socket Mode clients to reconnect (`{"type": "disconnect"}`)."""
        for sock in [s for s in self._sockets if not s.retired]:
            sock.retired = True
            frame = {"type": "disconnect", "reason": reason, "debug_info": {"host": "emulator"}}
            with contextlib.suppress(ConnectionError):
                await sock.ws.send_json(frame)
        await self._changed()

    def join(self, user: str, channel: str) -> None:
        """Makes ``user`` a member of ``channel`` (posting there makes one too)."""
        self.store.members.setdefault(channel, set()).add(user)

    def add_user(self, user_id: str, name: str | None = None) -> None:
        self.users.setdefault(user_id, user_record(user_id, self.identity.team_id, name))

    async def deliver_event(
        self,
        event: JSON,
        *,
        retry_of: DeliveredEvent | None = None,
        retry_reason: str | None = None,
    ) -> DeliveredEvent:
        """Delivers a raw event; `retry_of` re-sends it with the same event_id, retry_num + 1."""
        if retry_of is None:
            event_id = new_id("Ev")
            payload = event_callback(self.identity, event, event_id)
            return await self._deliver("events_api", payload, event_id=event_id)
        payload = {**retry_of.payload, "event": event}
        return await self._deliver(
            "events_api",
            payload,
            event_id=retry_of.event_id,
            retry_num=retry_of.retry_num + 1,
            retry_reason=retry_reason,
        )

    async def user_message(
        self,
        user: str,
        channel: str,
        text: str,
        *,
        thread_ts: str | None = None,
        channel_type: str | None = None,
        files: Sequence[JSON] = (),
        attachments: Sequence[JSON] = (),
    ) -> DeliveredEvent:
        """A user posts `text`: stored, then delivered as `message` (+ `app_mention` if the bot
        is mentioned, as a separate event in `.mention`). `files`: file objects from
        `user_file`, shared with the message (a `file_share` message, as Slack's);
        `attachments`: forwarded messages, with their own `files`."""
        kind = channel_type or self.store.channel_types.get(channel) or channel_type_of(channel)
        self.store.channel_types[channel] = kind
        self.add_user(user)
        message: JSON = {"user": user, "text": text, "team": self.identity.team_id}
        message["client_msg_id"] = str(uuid.uuid4())
        if thread_ts:
            message["thread_ts"] = thread_ts
        if files:
            message.update(subtype="file_share", upload=False, files=copy.deepcopy(list(files)))
        if attachments:
            message["attachments"] = copy.deepcopy(list(attachments))
        stored = self.store.add(channel, message)
        await self._changed()
        event = message_event(self.identity, channel, copy.deepcopy(stored), kind)
        delivered = await self.deliver_event(event)
        if f"<@{self.identity.bot_user_id}>" in text:
            delivered.mention = await self.deliver_event(mention_event(event))
        return delivered

    def user_file(
        self,
        user: str,
        name: str,
        content: bytes,
        *,
        mimetype: str | None = None,
        size: int | None = None,
        refuse: str | None = None,
        with_url: bool = True,
    ) -> JSON:
        """A file `user` shares, for `user_message(files=[...])`; served at its
        `url_private_download` to the bot's token only. `refuse` ("not_in_channel", ...)
        makes it one the bot may not see: files.info answers that error, a download 403."""
        return self.shared_files.add(
            user,
            name,
            content,
            mimetype=mimetype,
            size=size,
            refuse=refuse,
            with_url=with_url,
        )

    async def user_edit(self, user: str, channel: str, ts: str, text: str) -> DeliveredEvent:
        """A user edits their message: stored, then delivered as `message_changed`."""
        message = self.store.get(channel, ts)
        before = copy.deepcopy(message)
        message.update(text=text, edited={"user": user, "ts": self.store.next_ts()})
        kind = self.store.channel_types.get(channel, channel_type_of(channel))
        return await self.deliver_event(
            changed_event(channel, before, copy.deepcopy(message), kind)
        )

    async def user_delete(self, channel: str, ts: str) -> DeliveredEvent:
        """A user deletes their message: removed, then delivered as `message_deleted`."""
        before = copy.deepcopy(self.store.get(channel, ts))
        self.store.delete(channel, ts)
        kind = self.store.channel_types.get(channel, channel_type_of(channel))
        deletion_ts = self.store.next_ts()
        return await self.deliver_event(deleted_event(channel, before, deletion_ts, kind))

    async def slash_command(
        self, command: str, text: str, user: str, channel: str
    ) -> DeliveredEvent:
        """Runs a slash command. HTTP: `.status`/`.body`; Socket Mode: `.ack`. Either way the
        answer is `.response_payload`, and a text answer is shown to the user as ephemeral."""
        self.add_user(user)
        url = self._response_url(user, channel)
        fields = slash_fields(self.identity, command, text, user, channel, url)
        delivered = await self._deliver("slash_commands", fields)
        answer = delivered.response_payload
        if isinstance(answer, dict):
            self._respond({"user": user, "channel": channel}, answer)
            await self._changed()
        return delivered

    async def block_action(
        self,
        user: str,
        channel: str,
        message_ts: str,
        action_id: str,
        value: str,
        *,
        thread_ts: str | None = None,
    ) -> DeliveredEvent:
        """A user clicks a button (`action_id`, `value`) on the message at `message_ts`."""
        self.add_user(user)
        message = self.store.find(channel, message_ts)
        payload = block_actions(
            self.identity,
            user=user,
            channel=channel,
            message_ts=message_ts,
            message=copy.deepcopy(message),
            action_id=action_id,
            value=value,
            thread_ts=thread_ts or (message or {}).get("thread_ts"),
            response_url=self._response_url(user, channel, message_ts),
        )
        return await self._deliver("interactive", payload)

    # ------------------------------------------------------------------ observation

    def calls(self, method: str | None = None) -> list[ApiCall]:
        return [c for c in list(self._calls) if method is None or c.method == method]

    def deliveries(self, kind: str | None = None) -> list[DeliveredEvent]:
        return [d for d in list(self._deliveries) if kind is None or d.kind == kind]

    def acks(self) -> list[JSON]:
        return list(self._acks)

    @property
    def socket_connections(self) -> int:
        """How many Socket Mode connections were accepted so far."""
        return self._socket_count

    def thread(self, channel: str, thread_ts: str) -> list[JSON]:
        return self._read(lambda: self.store.thread(channel, thread_ts))

    def messages(self, channel: str) -> list[JSON]:
        return self._read(lambda: copy.deepcopy(self.store.channels.get(channel, [])))

    def uploaded(self, file_id: str) -> bytes:
        """The bytes uploaded for a file (``files[i]["id"]`` of a file_share message)."""
        return self._read(lambda: bytes(self.store.files[file_id]["content"]))

    def reactions(self, channel: str, ts: str) -> set[str]:
        return self._read(lambda: self.store.reaction_names(channel, ts))

    def ephemeral(self, user: str | None = None) -> list[JSON]:
        """Ephemeral messages (chat.postEphemeral, response_url, command answers), optionally
        only those shown to `user` (key `to`; `user` is the bot that sent it)."""
        entries = self._read(lambda: copy.deepcopy(self.store.ephemeral))
        return [e for e in entries if user is None or e.get("to") == user]

    def dump(self, last: int = 15) -> str:
        lines = [
            f"  {c.method} {c.status} {c.response.get('error', 'ok')} {c.params}"
            for c in self._calls[-last:]
        ]
        for d in self._deliveries[-5:]:
            lines.append(f"  -> {d.kind} {d.event.get('type', '')} status={d.status} ack={d.ack}")
        return "\n".join(lines) or "  (no calls)"

    async def wait_for(self, predicate: Callable[[], T | None], timeout: float = 5.0) -> T:
        """Waits until `predicate()` returns something truthy (re-checked on every change);
        returns it. Raises TimeoutError with the recent calls after `timeout` seconds."""
        async with self._cond:
            try:
                async with asyncio.timeout(timeout):
                    while not (result := predicate()):
                        await self._cond.wait()
                    return result
            except TimeoutError:
                raise TimeoutError(
                    f"condition not met within {timeout}s; recent Slack calls:\n{self.dump()}"
                ) from None

    async def wait_for_call(
        self,
        method: str,
        predicate: Callable[[ApiCall], object] | None = None,
        timeout: float = 5.0,
    ) -> ApiCall:
        """The first recorded call of `method` for which `predicate` is truthy (waits if needed)."""

        def find() -> ApiCall | None:
            match = (c for c in self.calls(method) if predicate is None or predicate(c))
            return next(match, None)

        return await self.wait_for(find, timeout)
