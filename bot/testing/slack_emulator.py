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
import threading
import uuid
from collections.abc import Callable, Coroutine, Iterator, Sequence
from types import TracebackType
from typing import Any, Self, TypeVar

from bot.testing.slack_agent_api import Stream
from bot.testing.slack_agent_users import AgentSurfaceUsers
from bot.testing.slack_api import user_record
from bot.testing.slack_delivery import BotDelivery, Mode
from bot.testing.slack_model import (
    JSON,
    ApiCall,
    DeliveredEvent,
    Identity,
    channel_type_of,
    transcript_line,
)
from bot.testing.slack_payloads import (
    block_actions,
    changed_event,
    deleted_event,
    mention_event,
    message_event,
    slash_fields,
)
from bot.testing.slack_server import EmulatorServer

__all__ = ["ApiCall", "DeliveredEvent", "SlackEmulator", "Stream", "transcript_line"]

T = TypeVar("T")


class SlackEmulator:
    """Loopback Slack. Use `async with SlackEmulator(...) as slack:` or `with s.in_thread():`.

    Its parts: `server` (Slack's state and routes), `faults` (Slack failing on cue), `agent`
    (the agent surfaces' users and what they show); the bot is delivered to by HTTP at
    `bot_url` or over Socket Mode (`delivery`).
    """

    def __init__(
        self,
        *,
        signing_secret: str = "emulator-signing-secret",
        bot_token: str = "xoxb-emulator",
        app_token: str = "xapp-emulator",
        bot_user_id: str = "UBOT",
        bot_id: str = "BBOT",
        team_id: str = "T1",
        app_id: str = "A1",
        bot_url: str | None = None,
        delivery: Mode | None = None,
        port: int = 0,
        ack_timeout: float = 3.0,
        connect_timeout: float = 10.0,
        http_timeout: float = 10.0,
    ) -> None:
        self.identity = Identity(
            bot_token, app_token, signing_secret, bot_user_id, bot_id, team_id, app_id
        )
        self.server = EmulatorServer(
            self.identity, port=port, ack_timeout=ack_timeout, connect_timeout=connect_timeout
        )
        self.store, self.api, self.faults = self.server.store, self.server.api, self.server.faults
        self.shared_files = self.server.shared_files
        self._bot = BotDelivery(
            self.identity,
            self.server.send_envelope,
            self.server.changes.notify,
            bot_url=bot_url,
            mode=delivery,
            http_timeout=http_timeout,
        )
        self.agent = AgentSurfaceUsers(
            self.api.agent,
            self.store,
            self.identity,
            self._bot,
            bot_message=self.api.bot_message,
            add_user=self.add_user,
            changed=self.server.changes.notify,
            response_url=self.server.response_url,
            read=self._read,
        )
        self._thread_loop: asyncio.AbstractEventLoop | None = None
        self._thread_id: int | None = None

    # ------------------------------------------------------------------ lifecycle

    @property
    def base_url(self) -> str:
        return self.server.base_url

    @property
    def api_url(self) -> str:
        return self.server.api_url

    @property
    def bot_url(self) -> str | None:
        return self._bot.bot_url

    @bot_url.setter
    def bot_url(self, url: str | None) -> None:
        self._bot.bot_url = url

    @property
    def delivery(self) -> str:
        """`http` (signed POSTs to `bot_url`), `socket`, or `none` (store, deliver nothing).

        By default http when `bot_url` is set, else socket."""
        return self._bot.mode

    @delivery.setter
    def delivery(self, mode: Mode | None) -> None:
        self._bot.mode = mode

    async def start(self) -> Self:
        await self.server.start()
        await self._bot.start()
        return self

    async def stop(self) -> None:
        await self.server.stop()
        await self._bot.stop()

    async def __aenter__(self) -> Self:
        return await self.start()

    async def __aexit__(
        self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.stop()

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
        return await self._bot.post_signed(
            body,
            content_type=content_type,
            signature_override=signature_override,
            timestamp_override=timestamp_override,
            headers=headers,
        )

    async def deliver_event(
        self,
        event: JSON,
        *,
        retry_of: DeliveredEvent | None = None,
        retry_reason: str | None = None,
    ) -> DeliveredEvent:
        """Delivers a raw event; `retry_of` re-sends it with the same event_id, retry_num + 1."""
        return await self._bot.deliver_event(event, retry_of=retry_of, retry_reason=retry_reason)

    async def disconnect_socket(self, reason: str = "refresh_requested") -> None:
        """Asks the connected Socket Mode clients to reconnect (`{"type": "disconnect"}`)."""
        await self.server.disconnect_socket(reason)

    def join(self, user: str, channel: str) -> None:
        """Makes ``user`` a member of ``channel`` (posting there makes one too)."""
        self.store.members.setdefault(channel, set()).add(user)

    def add_user(self, user_id: str, name: str | None = None) -> None:
        self.server.users.setdefault(user_id, user_record(user_id, self.identity.team_id, name))

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
        await self.server.changes.notify()
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
        redirect: str | None = None,
    ) -> JSON:
        """A file `user` shares, for `user_message(files=[...])`; served at its
        `url_private_download` to the bot's token only. `refuse` ("not_in_channel", ...)
        makes it one the bot may not see: files.info answers that error, a download 403.
        With `redirect`, its download answers 302 to that URL instead."""
        return self.shared_files.add(
            user,
            name,
            content,
            mimetype=mimetype,
            size=size,
            refuse=refuse,
            with_url=with_url,
            redirect=redirect,
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
        url = self.server.response_url(user, channel)
        fields = slash_fields(self.identity, command, text, user, channel, url)
        delivered = await self._bot.deliver("slash_commands", fields)
        answer = delivered.response_payload
        if isinstance(answer, dict):
            self.server.respond({"user": user, "channel": channel}, answer)
            await self.server.changes.notify()
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
        seen: JSON | None = None,
        state: JSON | None = None,
    ) -> DeliveredEvent:
        """A user clicks a button (`action_id`, `value`) on the message at `message_ts`; the
        payload carries the message as it is now, or as `seen` (a client showing an older
        version of it, buttons since removed included) and its menus' picks as ``state``."""
        self.add_user(user)
        message = self.store.find(channel, message_ts) if seen is None else seen
        payload = block_actions(
            self.identity,
            user=user,
            channel=channel,
            message_ts=message_ts,
            message=copy.deepcopy(message),
            action_id=action_id,
            value=value,
            thread_ts=thread_ts or (message or {}).get("thread_ts"),
            response_url=self.server.response_url(user, channel, message_ts),
            state=state,
        )
        return await self._bot.deliver("interactive", payload)

    # ------------------------------------------------------------------ observation

    def on_call(self, listener: Callable[[ApiCall], None]) -> None:
        """Calls `listener` with every recorded call (e.g. to print `transcript_line`s)."""
        self.server.on_call(listener)

    def calls(self, method: str | None = None) -> list[ApiCall]:
        return self.server.calls(method)

    def deliveries(self, kind: str | None = None) -> list[DeliveredEvent]:
        return self._bot.deliveries(kind)

    def acks(self) -> list[JSON]:
        return self.server.acks()

    @property
    def socket_connections(self) -> int:
        """How many Socket Mode connections were accepted so far."""
        return self.server.socket_connections

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
            for c in self.calls()[-last:]
        ]
        for d in self.deliveries()[-5:]:
            lines.append(f"  -> {d.kind} {d.event.get('type', '')} status={d.status} ack={d.ack}")
        return "\n".join(lines) or "  (no calls)"

    async def wait_for(self, predicate: Callable[[], T | None], timeout: float = 5.0) -> T:
        """Waits until `predicate()` returns something truthy (re-checked on every change);
        returns it. Raises TimeoutError with the recent calls after `timeout` seconds."""
        try:
            return await self.server.changes.wait_for(predicate, timeout)
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
