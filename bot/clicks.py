"""Clicks that start background work (*Open pull request*, *Fix checks*, *Run again*, and
the wait of ``/harness connect github``), kept in the ledger from before they are acked
until their work has answered, so that a bot stopped in between (a crash, a deploy) takes
each up again at its next start.

A click is kept as a request taken on (the ledger's intake) under ``click:<kind>:<subject>``;
whatever answers it settles that key in the same step as the answer (an owed message, an
agent's watch). At start, ``Clicks.resume`` hands each kept click to what its kind
registered, which finds what was done already (a pull request GitHub opened, an agent that
started) instead of doing it twice.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Coroutine, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal, TypedDict, get_args

from bot.background import Background
from bot.backlog import Backlog
from harness.errors import HarnessError
from harness.tasks.ledger import Ledger
from harness.tasks.model import DispatchRecord, ThreadRef

logger = logging.getLogger(__name__)

CLICK_PREFIX = "click:"
ClickKind = Literal["open", "fix", "rerun", "link", "plan", "note", "limits"]
_KINDS: dict[str, ClickKind] = {kind: kind for kind in get_args(ClickKind)}
NOT_KEPT = "Sorry, I could not note that click down ({problem}); press it again in a moment."


class ClickData(TypedDict):
    """A kept click as the ledger holds it."""

    click: ClickKind
    subject: str  # the task slug or agent id the button is about
    user: str
    thread: list[str]  # [channel, thread_ts]
    extra: dict[str, Any]


@dataclass(frozen=True)
class KeptClick:
    key: str
    kind: ClickKind
    subject: str
    user: str
    thread: ThreadRef
    at: float  # epoch seconds when it was taken on
    extra: dict[str, Any] = field(default_factory=dict)


Resumer = Callable[[KeptClick], Coroutine[Any, Any, None]]


def started_after(iso: str, at: float) -> bool:
    """Whether an ISO time is at or after ``at`` (epoch s, read from the same clock). Start
    times are kept to the millisecond, so that much slack and no more: an agent that started
    a moment before a click or a request (another one in the thread) is not taken for it."""
    try:
        started = datetime.fromisoformat(iso.replace("Z", "+00:00"))
    except ValueError:
        return False
    return started.timestamp() >= at - 0.001


def started_since(dispatches: Iterable[DispatchRecord], role: str | None, at: float) -> bool:
    """Whether an agent (of ``role``, when given) started at or after ``at``: a click's
    agent that started before a stop is not started twice."""
    return any(
        (role is None or d.role == role) and started_after(d.started_at, at) for d in dispatches
    )


def is_click(key: str) -> bool:
    return key.startswith(CLICK_PREFIX)


def click_key(kind: ClickKind, subject: str) -> str:
    return f"{CLICK_PREFIX}{kind}:{subject}"


def click_record(
    kind: ClickKind, subject: str, user: str, thread: ThreadRef, extra: dict[str, Any] | None
) -> tuple[str, dict[str, Any]]:
    """The ledger's (key, data) of a click."""
    data: ClickData = {
        "click": kind,
        "subject": subject,
        "user": user,
        "thread": [thread.channel, thread.thread_ts],
        "extra": dict(extra or {}),
    }
    return click_key(kind, subject), dict(data)


def parse_click(key: str, data: dict[str, Any], at: float) -> KeptClick | None:
    """A kept click read back (None: unreadable)."""
    kind, subject, user = _KINDS.get(str(data.get("click"))), data.get("subject"), data.get("user")
    thread, extra = data.get("thread"), data.get("extra") or {}
    if kind is None or not isinstance(subject, str) or not subject:
        return None
    if not isinstance(user, str) or not isinstance(extra, dict):
        return None
    if not (
        isinstance(thread, list) and len(thread) == 2 and all(isinstance(t, str) for t in thread)
    ):
        return None
    return KeptClick(key, kind, subject, user, ThreadRef(thread[0], thread[1]), at, extra)


async def take_once(
    ledger: Ledger,
    kind: ClickKind,
    subject: str,
    user: str,
    thread: ThreadRef,
    extra: dict[str, Any],
    *,
    already: str,
) -> KeptClick | str:
    """Keeps a click whose work runs once whoever presses (``<kind>:<subject>`` claimed and
    the click kept in one step: a stop in between cannot lose it): the click to carry out,
    or why not for the person (``already`` when it was taken before)."""
    key, data = click_record(kind, subject, user, thread, extra)
    try:
        if not await ledger.claim(f"{kind}:{subject}", intake=(key, data)):
            return already
    except HarnessError as exc:
        return NOT_KEPT.format(problem=exc.message)
    now = ledger.clock.now().timestamp()
    return KeptClick(key, kind, subject, user, thread, now, dict(data["extra"]))


def shown_message(message: object) -> dict[str, Any] | None:
    """The message a button was under, as shown (its ts, text and blocks), to mark it done
    later; None when the payload does not carry it."""
    if not isinstance(message, Mapping) or not isinstance(message.get("ts"), str):
        return None
    blocks = message.get("blocks")
    if not isinstance(blocks, list) or not blocks:
        return None
    return {"ts": message["ts"], "text": str(message.get("text", "")), "blocks": list(blocks)}


class Clicks:
    def __init__(self, ledger: Ledger, background: Background, backlog: Backlog) -> None:
        self.ledger = ledger
        self.background = background
        self.backlog = backlog  # a settling the disk refuses is written when it can be
        self._resumers: dict[ClickKind, Resumer] = {}

    def on(self, kind: ClickKind, resume: Resumer) -> None:
        """What takes a kept click of ``kind`` up again after a restart."""
        self._resumers[kind] = resume

    async def take(
        self,
        kind: ClickKind,
        subject: str,
        user: str,
        thread: ThreadRef,
        extra: dict[str, Any] | None = None,
    ) -> str | None:
        """Keeps the click (before it is acked); why not, for the person (None: kept). A
        click of the same kind on the same subject still kept is the same click."""
        key, data = click_record(kind, subject, user, thread, extra)
        try:
            await self.ledger.remember((), intake={key: data})
        except HarnessError as exc:  # the ledger's disk refused it: nothing starts
            logger.warning("could not keep the click %s: %s", key, exc.message)
            return NOT_KEPT.format(problem=exc.message)
        return None

    async def settle(self, key: str) -> None:
        """The click ``key`` is answered (or has nothing left to do)."""
        await self.backlog.write(lambda: self.ledger.handled(key), f"settle {key}")

    async def resume(self) -> int:
        """At start: takes up again every click kept before a stop; how many."""
        resumed = 0
        for key, data, at in await self.ledger.intake():
            if not is_click(key):
                continue
            click = parse_click(key, data, at)
            resume = self._resumers.get(click.kind) if click is not None else None
            if click is None or resume is None:
                logger.warning("unreadable click %s in the ledger: dropped", key)
                await self.settle(key)
                continue
            logger.info("taking up %s again: the bot stopped before it answered", key)
            self.background.spawn(resume(click), name=f"resume {key}")
            resumed += 1
        return resumed
