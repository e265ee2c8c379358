"""Routines in Slack's own views: ``/harness routines`` (each routine's trigger, next firing,
last run, failures in a row, paused or not) with *Run now* and *Pause* / *Resume* buttons for
the routine's owner and the admins, and the same list as a section of the App Home.
``routine_blocks`` is pure; ``RoutineViews`` reads the routines' state and acts on clicks."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from slack_bolt.app.async_app import AsyncApp
from slack_bolt.context.ack.async_ack import AsyncAck
from slack_bolt.context.respond.async_respond import AsyncRespond

from bot.blocks import escape
from harness.clock import timestamp
from harness.config.routines_schema import Routine
from harness.config.settings import SlackSettings
from harness.routines.model import Firing, LaunchedRun, Pause, RoutineState
from harness.routines.schedule import next_firing
from harness.routines.service import RoutineService

logger = logging.getLogger(__name__)

RUN_ACTION = "routine_run"
PAUSE_ACTION = "routine_pause"
RESUME_ACTION = "routine_resume"
Block = dict[str, Any]


def _button(text: str, action: str, value: str) -> Block:
    return {"type": "button", "text": {"type": "plain_text", "text": text},
            "action_id": action, "value": value}  # fmt: skip


def routine_blocks(
    routine: Routine, state: RoutineState, now: datetime, *, buttons: bool
) -> list[Block]:
    """One routine: what triggers it, when it fires next (or why it is paused), its last run
    and failures in a row; with ``buttons``, *Run now* and *Pause* / *Resume*."""
    upcoming = next_firing(routine, now)
    if state.paused is not None:
        when = f"⏸️ paused: {escape(state.paused.why)}"
    elif upcoming is not None:
        shown = "{date_short_pretty} {time}"
        when = f"next <!date^{int(upcoming.timestamp())}^{shown}|{timestamp(upcoming)}>"
    else:
        when = "fires on its trigger"
    parts = [f"*{escape(routine.name)}*", escape(routine.trigger_text()), when]
    if state.runs:
        last = state.runs[-1]
        cost = f" ${last.cost_usd:.2f}" if last.cost_usd is not None else ""
        where = f" <{last.thread}|{escape(last.slug or 'thread')}>" if last.thread else ""
        parts.append(f"last run {last.status}{cost}{where}")
    parts.append(f"{state.failures}/{routine.disable_after_failures} failures in a row")
    blocks: list[Block] = [
        {"type": "section", "text": {"type": "mrkdwn", "text": " · ".join(parts)}}
    ]
    if buttons:
        toggle = (
            _button("Resume", RESUME_ACTION, routine.name)
            if state.paused is not None
            else _button("Pause", PAUSE_ACTION, routine.name)
        )
        blocks.append({"type": "actions", "elements": [
            _button("Run now", RUN_ACTION, routine.name), toggle,
        ]})  # fmt: skip
    return blocks


class RoutineViews:
    def __init__(self, service: RoutineService, settings: SlackSettings) -> None:
        self.service = service
        self.settings = settings

    def may_operate(self, user: str, routine: Routine) -> bool:
        return user == routine.owner or user in self.settings.admins

    async def _states(self) -> list[tuple[Routine, RoutineState]]:
        routines = list(self.service.routines.values())
        states = await asyncio.gather(
            *(asyncio.to_thread(self.service.states.read, r.name) for r in routines)
        )
        return list(zip(routines, states, strict=True))

    async def blocks(self, user: str) -> list[Block]:
        now = self.service.clock.now()
        blocks: list[Block] = []
        for routine, state in await self._states():
            buttons = self.may_operate(user, routine)
            blocks += routine_blocks(routine, state, now, buttons=buttons)
        return blocks

    async def answer(self, user: str) -> dict[str, Any]:
        """``/harness routines``: the ack's text and blocks."""
        found = await self.blocks(user)
        if not found:
            return {"text": "No routines: add them under `routines:` in config.yaml."}
        header = {"type": "section", "text": {"type": "mrkdwn", "text": "*Routines*"}}
        return {"text": "Routines", "blocks": [header, *found]}

    async def home_blocks(self, user: str) -> Sequence[Block]:
        found = await self.blocks(user)
        if not found:
            return []
        header = {"type": "header", "text": {"type": "plain_text", "text": "Routines"}}
        return [{"type": "divider"}, header, *found]

    def register(self, app: AsyncApp) -> None:
        for action in (RUN_ACTION, PAUSE_ACTION, RESUME_ACTION):
            app.action(action)(self.on_click)

    async def on_click(
        self, ack: AsyncAck, body: dict[str, Any], action: dict[str, Any], respond: AsyncRespond
    ) -> None:
        await ack()
        user = str((body.get("user") or {}).get("id", ""))
        routine = self.service.routines.get(str(action.get("value", "")))
        if routine is None:
            said = "That routine is no longer in config.yaml."
        elif not self.may_operate(user, routine):
            said = (
                "Only the routine's owner and the admins can run or pause "
                f"*{escape(routine.name)}*."
            )
        else:
            said = await self._act(str(action.get("action_id")), routine, user)
        logger.info("routine button %s by %s: %s", action.get("action_id"), user, said)
        await respond(text=said, response_type="ephemeral", replace_original=False)

    async def _act(self, action: str, routine: Routine, user: str) -> str:
        service, name = self.service, routine.name
        if action == RUN_ACTION:
            clock = service.clock
            firing = Firing(name, "run", f"run:{clock.token(8)}", timestamp(clock.now()),
                            "Run now in Slack", by=f"<@{user}>")  # fmt: skip
            started = await service.fire(routine, firing)
            if isinstance(started, LaunchedRun):
                return f"Started *{escape(name)}*: <{started.thread}|{escape(started.slug)}>"
            return f"*{escape(name)}* did not start: {escape(started)}"
        pause = action == PAUSE_ACTION
        at = timestamp(service.clock.now())

        def change(state: RoutineState) -> RoutineState:
            if not pause:
                return dataclasses.replace(state, paused=None, failures=0)
            return dataclasses.replace(state, paused=Pause(at, user, f"paused in Slack by {user}"))

        await asyncio.to_thread(service.states.update, name, change)
        return f"*{escape(name)}* is {'paused' if pause else 'resumed'}."
