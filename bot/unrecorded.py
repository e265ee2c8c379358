"""What the ledger keeps of people's requests, written now or, while its disk refuses, later;
and the requests it could not record (the disk under it is full): the person hears so,
once, and each is handled, in its thread's turn, as soon as the ledger takes writes again.

A request is acted on only once the ledger knows it was seen (bot/conversations.py), so one
it cannot record waits here, in memory, rather than run unrecorded or be dropped.
"""

from __future__ import annotations

import errno
import logging
from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any

from bot.outbox import Outbox
from bot.parsing import UserMessage
from bot.threads import ThreadLanes
from harness.errors import HarnessError
from harness.tasks.ledger import LedgerUnwritableError
from harness.tasks.model import ThreadRef

logger = logging.getLogger(__name__)

Job = Callable[[], Awaitable[None]]

NOT_RECORDED = (
    "⚠️ I cannot record your request right now: the disk where I keep my tasks refuses "
    "writes ({why}). I will start on it by myself once it takes them again; no need to send "
    "it again."
)


def intake_key(message: UserMessage) -> str:
    """A person's message as the ledger knows it (seen, and taken on)."""
    return f"message:{message.channel}:{message.ts}"


class NotRecordedError(HarnessError):
    """A request the task store cannot record now (its disk is full): it waits."""


def not_recorded(exc: BaseException) -> bool:
    """Whether ``exc`` says the disk is full (or over quota), not that the request is bad."""
    if isinstance(exc, LedgerUnwritableError | NotRecordedError):
        return True
    return isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT)


class UnrecordedRequests:
    def __init__(self, outbox: Outbox, lanes: ThreadLanes) -> None:
        self.outbox = outbox
        self.lanes = lanes
        self._waiting: list[tuple[ThreadRef, Job]] = []
        self._told: set[str] = set()  # the requests whose person was told (intake keys)

    def __len__(self) -> int:
        return len(self._waiting)

    async def defer(self, key: str, thread: ThreadRef, job: Job) -> None:
        """Runs ``job`` again once the ledger takes writes; tells the thread why it waits
        (once per request, however often it is deferred)."""
        if not self._waiting:
            self.outbox.backlog.when_writable(self._replay)
        self._waiting.append((thread, job))
        if key in self._told:
            return
        self._told.add(key)
        why = (self.outbox.backlog.problem or "").rpartition(": ")[2] or "the disk is full"
        logger.warning("request %s not recorded (%s): it waits for the disk", key, why)
        notice = NOT_RECORDED.format(why=why)
        await self.outbox.owe(thread, [{"op": "post", "message": notice}])

    async def handled(self, key: str) -> None:
        """The request ``key`` is handled; a disk that refuses to note it now notes it later."""
        self._told.discard(key)
        ledger = self.outbox.ledger
        await self.outbox.backlog.write(partial(ledger.handled, key), "request handled")

    async def note(self, key: str, **fields: Any) -> None:
        """Adds ``fields`` to the request the ledger keeps (now, or once it can)."""
        ledger = self.outbox.ledger
        await self.outbox.backlog.write(partial(ledger.annotate_intake, key, **fields), "note")

    def _replay(self) -> None:
        waiting, self._waiting = self._waiting, []
        if waiting:
            logger.info("the ledger takes writes again: handling %d request(s)", len(waiting))
        for thread, job in waiting:
            self.lanes.enqueue(thread, job, name=f"request kept for {thread.channel}")
