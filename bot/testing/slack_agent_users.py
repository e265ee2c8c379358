"""Slack's agent surfaces as the emulator's simulated users meet them (assistant threads, the
Home tab, message shortcuts), and what tests observe of them (status lines, prompts, titles,
streams, home views). `SlackEmulator` holds one as `slack.agent`."""

from __future__ import annotations

import copy
from collections.abc import Awaitable, Callable
from typing import Protocol, TypeVar

from bot.testing.slack_agent_api import AgentSurfaces, StatusSet, Stream
from bot.testing.slack_delivery import BotDelivery
from bot.testing.slack_model import JSON, DeliveredEvent, Identity, MessageStore
from bot.testing.slack_payloads import (
    agent_session_stopped_event,
    app_home_opened_event,
    assistant_thread_event,
    block_actions,
    message_action,
)
from bot.testing.slack_sessions import Session

T = TypeVar("T")


class Read(Protocol):
    """Runs `fn`, a read of the emulator's state, where that is safe (the emulator's loop)."""

    def __call__(self, fn: Callable[[], T]) -> T: ...


class AgentSurfaceUsers:
    """Users acting on the agent surfaces (delivered by `delivery`), the surfaces' settings,
    and what they show (`surfaces`, the Web API's agent state)."""

    def __init__(
        self,
        surfaces: AgentSurfaces,
        store: MessageStore,
        identity: Identity,
        delivery: BotDelivery,
        *,
        bot_message: Callable[[JSON], JSON],
        add_user: Callable[[str], None],
        changed: Callable[[], Awaitable[None]],
        response_url: Callable[[str, str, str], str],
        read: Read,
    ) -> None:
        self.surfaces = surfaces
        self.store = store
        self.identity = identity
        self._delivery = delivery
        self._bot_message = bot_message
        self._add_user = add_user
        self._changed = changed
        self._response_url = response_url
        self._read = read

    # ------------------------------------------------------------------ simulated users

    async def assistant_thread_started(
        self,
        user: str,
        channel: str,
        *,
        thread_ts: str | None = None,
        context: JSON | None = None,
    ) -> str:
        """A user opens a new assistant thread (the split view) in their DM `channel` with the
        bot: Slack makes its root message (subtype `assistant_app_thread`) and sends
        `assistant_thread_started`. Returns the root's ts (`thread_ts` reuses a stored message
        as the root). `context` is the channel the user is viewing, e.g. {"channel_id": "C1"}."""
        self._add_user(user)
        self.store.channel_types[channel] = "im"
        if thread_ts is None:
            root = self._bot_message({"text": "New Assistant Thread"})
            root["subtype"] = "assistant_app_thread"
            thread_ts = str(self.store.add(channel, root)["ts"])
            await self._changed()
        kind = "assistant_thread_started"
        event = assistant_thread_event(self.identity, kind, user, channel, thread_ts, context)
        await self._delivery.deliver_event(event)
        return thread_ts

    async def assistant_thread_context_changed(
        self, user: str, channel: str, thread_ts: str, context: JSON
    ) -> DeliveredEvent:
        """The user, assistant thread open, moves to another channel (`context`)."""
        kind = "assistant_thread_context_changed"
        event = assistant_thread_event(self.identity, kind, user, channel, thread_ts, context)
        return await self._delivery.deliver_event(event)

    async def app_home_opened(
        self, user: str, tab: str = "home", *, channel: str | None = None
    ) -> DeliveredEvent:
        """A user opens the app's Home (or Messages) tab: `app_home_opened` in their DM with
        the bot (`D<user>` unless given), with the Home view published for them, if any."""
        self._add_user(user)
        view = copy.deepcopy(self.surfaces.home_views.get(user))
        event = app_home_opened_event(user, channel or f"D{user}", tab, view)
        return await self._delivery.deliver_event(event)

    async def home_action(self, user: str, action_id: str, value: str) -> DeliveredEvent:
        """A user clicks a button (`action_id`, `value`) in the Home tab the bot published."""
        self._add_user(user)
        view = copy.deepcopy(self.surfaces.home_views.get(user) or {"type": "home"})
        payload = block_actions(
            self.identity,
            user=user,
            channel="",
            message_ts="",
            message=None,
            action_id=action_id,
            value=value,
            thread_ts=None,
            response_url="",
        )
        for key in ("channel", "message", "response_url"):
            del payload[key]
        payload["container"] = {"type": "view", "view_id": view.get("id", "")}
        payload["view"] = view
        return await self._delivery.deliver("interactive", payload)

    async def message_shortcut(
        self, user: str, channel: str, message_ts: str, callback_id: str
    ) -> DeliveredEvent:
        """A user picks the app's message shortcut `callback_id` on a stored message."""
        self._add_user(user)
        message = copy.deepcopy(self.store.get(channel, message_ts))
        payload = message_action(
            self.identity,
            user=user,
            channel=channel,
            message=message,
            callback_id=callback_id,
            response_url=self._response_url(user, channel, message_ts),
        )
        return await self._delivery.deliver("interactive", payload)

    async def press_stop(self, user: str, channel: str, thread_ts: str) -> DeliveredEvent:
        """A user presses the Stop button of the thread's agent session: Slack stops the app's
        streams in the thread, then sends `agent_session_stopped` naming them. It leaves the
        session's status to the app. Raises when the thread has no session, or the app is not
        subscribed to the event (Slack shows no Stop button then)."""
        self._add_user(user)
        self.surfaces.sessions.press_stop(channel, thread_ts)
        stopped = []
        for stream in self.surfaces.streams.values():
            live = stream.state == "streaming"
            if live and (stream.channel, stream.thread_ts) == (channel, thread_ts):
                stream.state = "stopped"
                stopped.append(stream.ts)
        event = agent_session_stopped_event(user, channel, thread_ts, stopped)
        return await self._delivery.deliver_event(event)

    def declare_agent(self, refused: str | None = None) -> None:
        """`refused`: the app is not declared an agent, and every agents.sessions call answers
        this error (e.g. "not_allowed"); None: it is one again."""
        self.surfaces.sessions.not_declared = refused

    def subscribe_to_stop(self, subscribed: bool = True) -> None:
        """Whether the app subscribes to `agent_session_stopped` (not: setStatus warns)."""
        self.surfaces.sessions.stop_subscribed = subscribed

    def refuse_streaming(self, error: str | None = "not_allowed_token_type") -> None:
        """From now on chat.startStream answers `error` (None: streams are allowed again)."""
        self.surfaces.streaming_refused = error

    # ------------------------------------------------------------------ observation

    def statuses(self, channel: str, thread_ts: str) -> list[str]:
        """Every status the bot set on an assistant thread, in order ("" clears)."""
        return [s.status for s in self.status_history(channel, thread_ts)]

    def status_history(self, channel: str, thread_ts: str) -> list[StatusSet]:
        """Every setStatus on a thread, in order: status, loading messages, time."""
        return self._read(lambda: list(self.surfaces.statuses.get((channel, thread_ts), [])))

    def status(self, channel: str, thread_ts: str) -> str:
        """The status line the thread shows now (cleared by the bot's reply)."""
        return self.surfaces.current_status.get((channel, thread_ts), "")

    def suggested_prompts(self, channel: str, thread_ts: str) -> list[JSON]:
        return list(self.surfaces.prompts.get((channel, thread_ts), []))

    def suggested_prompts_title(self, channel: str, thread_ts: str) -> str | None:
        return self.surfaces.prompt_titles.get((channel, thread_ts))

    def title(self, channel: str, thread_ts: str) -> str | None:
        return self.surfaces.titles.get((channel, thread_ts))

    def streams(self, channel: str, thread_ts: str | None = None) -> list[Stream]:
        """The streamed messages of a channel (of one thread), oldest first."""
        found = [s for (c, _), s in self.surfaces.streams.items() if c == channel]
        return [s for s in found if thread_ts is None or s.thread_ts == thread_ts]

    def stream(self, channel: str, ts: str) -> Stream | None:
        """The streamed message at `ts` (a copy): text, appends, tasks, plan title, state,
        recipient."""
        return self._read(lambda: copy.deepcopy(self.surfaces.streams.get((channel, ts))))

    def session(self, channel: str, thread_ts: str) -> Session | None:
        """The thread's agent session (a copy): status, title, initiator, status history."""
        return self._read(
            lambda: copy.deepcopy(self.surfaces.sessions.sessions.get((channel, thread_ts)))
        )

    def session_status(self, channel: str, thread_ts: str) -> str | None:
        """The thread's session status now; None while it has no session."""
        session = self.session(channel, thread_ts)
        return session.status if session is not None else None

    def home_view(self, user: str) -> JSON | None:
        return self.surfaces.home_views.get(user)
