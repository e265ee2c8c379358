"""The browser page of ``harness bot --emulator``: routes on the Slack emulator's own server.

``GET /`` serves the page (``bot/web/``: plain HTML, CSS and JS, no build step), ``GET
/ui/state?since=N`` answers what the person sees (channels, messages with their blocks,
streams, statuses, ephemeral answers, the Home tab) once the emulator changed after version N
(a long poll, bounded), and the ``POST /ui/...`` routes are what the person does: write a
message, click a button, open the Home tab, run a slash command, press Stop. Each is the
emulator's simulated user doing it, so the bot gets what Slack would send.

The page is for one person on this machine: the emulator listens on loopback only, and the
POST routes take JSON alone, which a browser sends cross-site only after a CORS preflight that
is never answered, so another site open in the browser cannot post as that person.
"""

from __future__ import annotations

import contextlib
import copy
import logging
import re
from collections.abc import Awaitable, Callable
from importlib import resources
from typing import Any

from aiohttp import web

from bot.testing.slack_emulator import DeliveredEvent, SlackEmulator
from bot.testing.slack_model import JSON

logger = logging.getLogger(__name__)

USER, USER_NAME = "UYOU", "you"
DM = f"D{USER}"  # the person's DM with the bot (where Slack's Home tab events say it is)
CHANNEL, CHANNEL_NAME = "CGENERAL", "general"
COMMAND = "/harness"
# How long a poll waits for a change before answering with the same state.
POLL_SECONDS = 20.0
_TEXT_LIMIT = 40_000
_CHANNEL_ID = re.compile(r"^[CDG][A-Z0-9]{1,20}$")
_TS = re.compile(r"^\d{1,12}\.\d{6}$")
_ASSETS = {
    "/": ("emulator.html", "text/html"),
    "/ui/emulator.js": ("emulator.js", "application/javascript"),
    "/ui/emulator.css": ("emulator.css", "text/css"),
}


class BadInputError(ValueError):
    """What the page sent is not a request it can make (answered 400 with the reason)."""


def asset(name: str) -> str:
    """A file of the page, from the package (a wheel carries them: package data)."""
    return resources.files("bot").joinpath("web", name).read_text(encoding="utf-8")


class EmulatorPage:
    """The page's routes over one emulator, for the person ``USER``."""

    def __init__(self, slack: SlackEmulator, *, poll_seconds: float = POLL_SECONDS) -> None:
        self.slack = slack
        self.poll_seconds = poll_seconds
        slack.add_user(USER, USER_NAME)
        slack.join(USER, CHANNEL)
        slack.store.channel_types.setdefault(DM, "im")
        slack.store.channel_types.setdefault(CHANNEL, "channel")
        self.names = {DM: slack.identity.bot_name, CHANNEL: CHANNEL_NAME}

    def add_routes(self, app: web.Application) -> None:
        for path in _ASSETS:
            app.router.add_get(path, self._asset)
        app.router.add_get("/ui/state", self._state)
        routes: dict[str, Callable[[JSON], Awaitable[JSON]]] = {
            "message": self.message,
            "action": self.action,
            "command": self.command,
            "home": self.home,
            "stop": self.stop,
        }
        for name, handler in routes.items():
            app.router.add_post(f"/ui/{name}", _json_route(handler))

    async def _asset(self, request: web.Request) -> web.Response:
        name, kind = _ASSETS[request.path]
        return web.Response(text=asset(name), content_type=kind, headers=_NO_STORE)

    async def _state(self, request: web.Request) -> web.Response:
        try:
            since = int(request.query.get("since", "-1"))
        except ValueError:
            return web.json_response({"error": "since: a number"}, status=400)
        changes = self.slack.server.changes
        with contextlib.suppress(TimeoutError):
            await changes.wait_for(lambda: changes.version > since, self.poll_seconds)
        return web.json_response(self.state(), headers=_NO_STORE)

    # ------------------------------------------------------------------ what the person sees

    def state(self) -> JSON:
        """Everything the page shows, as of the emulator's current version."""
        slack, store = self.slack, self.slack.store
        surfaces = slack.api.agent
        channels = [DM, CHANNEL, *sorted(c for c in store.channels if c not in (DM, CHANNEL))]
        messages = {c: [self._message(c, m) for m in store.channels.get(c, [])] for c in channels}
        ephemeral = [_visible(e) for e in store.ephemeral if e.get("to") == USER]
        sessions = surfaces.sessions.sessions
        return {
            "version": slack.server.changes.version,
            "user": USER,
            "bot_user": slack.identity.bot_user_id,
            "bot_name": slack.identity.bot_name,
            "names": {uid: str(u.get("name") or uid) for uid, u in slack.server.users.items()},
            "channels": [
                {"id": c, "name": self.names.get(c, c.lower()), "kind": _kind(store, c)}
                for c in channels
            ],
            "messages": messages,
            "ephemeral": ephemeral,
            "statuses": {f"{c} {t}": s for (c, t), s in surfaces.current_status.items() if s},
            "sessions": {f"{c} {t}": s.status for (c, t), s in sessions.items()},
            "home": copy.deepcopy(surfaces.home_views.get(USER)),
        }

    def _message(self, channel: str, message: JSON) -> JSON:
        shown = _visible(message)
        stream = self.slack.api.agent.streams.get((channel, str(message.get("ts"))))
        if stream is not None:
            shown["streaming"] = stream.state == "streaming"
            shown["tasks"] = [
                {"title": str(t.get("title") or t.get("id")), "status": str(t.get("status"))}
                for t in stream.tasks.values()
            ]
            shown["plan"] = stream.plan_title
        return shown

    # ------------------------------------------------------------------ what the person does

    async def message(self, body: JSON) -> JSON:
        channel = _channel(body)
        text = _text(body, "text")
        if text.startswith("/"):
            raise BadInputError(f"slash commands go through /ui/command: {COMMAND} ...")
        # "@harness" as a person types it is a mention of the bot, as Slack's autocomplete makes.
        bot = self.slack.identity
        text = re.sub(rf"@{re.escape(bot.bot_name)}\b", f"<@{bot.bot_user_id}>", text)
        thread_ts = _optional_ts(body, "thread_ts")
        sent = await self.slack.user_message(USER, channel, text, thread_ts=thread_ts)
        return {"ts": sent.event.get("ts"), **_delivered(sent)}

    async def action(self, body: JSON) -> JSON:
        action_id, value = _text(body, "action_id", 255), _text(body, "value", 2000, empty=True)
        if body.get("view") == "home":
            return _delivered(await self.slack.agent.home_action(USER, action_id, value))
        channel, ts = _channel(body), _ts(body, "ts")
        if self.slack.store.find(channel, ts) is None:
            raise BadInputError(f"no message {ts} in {channel}")
        clicked = await self.slack.block_action(USER, channel, ts, action_id, value)
        return _delivered(clicked)

    async def command(self, body: JSON) -> JSON:
        channel = _channel(body)
        line = _text(body, "text")
        name, _, text = line.partition(" ")
        if name != COMMAND:
            raise BadInputError(f"the bot has one slash command: {COMMAND} (try `{COMMAND} help`)")
        answered = await self.slack.slash_command(COMMAND, text.strip(), USER, channel)
        return _delivered(answered)

    async def home(self, _body: JSON) -> JSON:
        return _delivered(await self.slack.agent.app_home_opened(USER, "home", channel=DM))

    async def stop(self, body: JSON) -> JSON:
        channel, thread_ts = _channel(body), _ts(body, "thread_ts")
        try:
            pressed = await self.slack.agent.press_stop(USER, channel, thread_ts)
        except ValueError as exc:
            raise BadInputError(str(exc)) from None
        return _delivered(pressed)


_NO_STORE = {"Cache-Control": "no-store"}


def _json_route(
    handler: Callable[[JSON], Awaitable[JSON]],
) -> Callable[[web.Request], Awaitable[web.Response]]:
    async def route(request: web.Request) -> web.Response:
        if request.content_type != "application/json":
            return web.json_response({"error": "send application/json"}, status=415)
        try:
            body = await request.json()
            if not isinstance(body, dict):
                raise BadInputError("the body is a JSON object")
            return web.json_response(await handler(body))
        except (BadInputError, ValueError) as exc:
            return web.json_response({"error": str(exc) or "not JSON"}, status=400)
        except (TimeoutError, OSError) as exc:  # the bot did not take it
            logger.warning("emulator page: %s not delivered: %r", request.path, exc)
            return web.json_response({"error": f"the bot did not answer: {exc!r}"}, status=502)

    return route


def _delivered(delivered: DeliveredEvent) -> JSON:
    """Whether the bot took it (HTTP 2xx, or a Socket Mode ack)."""
    return {"delivered": delivered.acked, "status": delivered.status}


def _visible(message: JSON) -> JSON:
    keys = ("ts", "thread_ts", "user", "bot_id", "text", "blocks", "reactions", "reply_count",
            "subtype", "edited", "channel", "files")  # fmt: skip
    return {k: copy.deepcopy(message[k]) for k in keys if k in message}


def _kind(store: Any, channel: str) -> str:
    return str(store.channel_types.get(channel) or ("im" if channel.startswith("D") else "channel"))


def _channel(body: JSON) -> str:
    channel = body.get("channel")
    if not isinstance(channel, str) or not _CHANNEL_ID.match(channel):
        raise BadInputError("channel: a channel id such as CGENERAL or DUYOU")
    return channel


def _ts(body: JSON, key: str) -> str:
    ts = body.get(key)
    if not isinstance(ts, str) or not _TS.match(ts):
        raise BadInputError(f"{key}: a message timestamp such as 1700000000.000100")
    return ts


def _optional_ts(body: JSON, key: str) -> str | None:
    return None if body.get(key) in (None, "") else _ts(body, key)


def _text(body: JSON, key: str, limit: int = _TEXT_LIMIT, *, empty: bool = False) -> str:
    text = body.get(key)
    if not isinstance(text, str) or (not empty and not text.strip()):
        raise BadInputError(f"{key}: some text")
    if len(text) > limit:
        raise BadInputError(f"{key}: at most {limit} characters")
    return text if empty else text.strip()
