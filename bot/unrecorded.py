"""What the ledger keeps of people's requests, written now or, while its disk refuses, later;
and the requests it could not record (the disk under it is full): the person hears so,
once, and each is handled, in its thread's turn, as soon as the ledger takes writes again.

A request is acted on only once the ledger knows it was seen (bot/conversations.py), so one
it cannot record waits here, in memory, rather than run unrecorded or be dropped. So that a
bot stopped meanwhile (killed, say) does not lose it, it is also written where the full disk
is not: a small file per request in this user's runtime folder (``$XDG_RUNTIME_DIR``, else
the temporary folder: memory on most systems), private to the user and named after the
ledger, which the next start replays (bot/unfinished.py) and which goes once the request is
handled. When even that cannot be written, the person is told to send it again should the
bot restart before the disk frees.
"""

from __future__ import annotations

import asyncio
import errno
import hashlib
import logging
import os
import re
import stat
import tempfile
from collections.abc import Awaitable, Callable
from functools import partial
from pathlib import Path
from typing import Any

from bot.outbox import Outbox
from bot.parsing import UserMessage
from bot.threads import ThreadLanes
from harness.errors import HarnessError
from harness.spool import Spool
from harness.tasks.ledger import LedgerUnwritableError
from harness.tasks.model import ThreadRef

logger = logging.getLogger(__name__)

Job = Callable[[], Awaitable[None]]

NOT_RECORDED = (
    "⚠️ I cannot record your request right now: the disk where I keep my tasks refuses "
    "writes ({why}). I will start on it by myself once it takes them again; no need to send "
    "it again."
)
UNLESS_RESTARTED = " Should I be restarted before then, please send it again: I could not keep it."


def intake_key(message: UserMessage) -> str:
    """A person's message as the ledger knows it (seen, and taken on)."""
    return message_key(message.channel, message.ts)


def message_key(channel: str, ts: str) -> str:
    return f"message:{channel}:{ts}"


class NotRecordedError(HarnessError):
    """A request the task store cannot record now (its disk is full): it waits."""


def not_recorded(exc: BaseException) -> bool:
    """Whether ``exc`` says the disk is full (or over quota), not that the request is bad."""
    if isinstance(exc, LedgerUnwritableError | NotRecordedError):
        return True
    return isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT)


def deferred_folder(ledger: Path) -> Path:
    """Where the requests a full disk kept from the ``ledger`` file are kept for the next
    start: off the task store's disk, one folder per ledger."""
    base = Path(os.environ.get("XDG_RUNTIME_DIR") or tempfile.gettempdir())
    store = hashlib.sha256(str(ledger.resolve()).encode("utf-8")).hexdigest()[:16]
    return base / f"harness-{os.getuid()}" / f"deferred-{store}"


def _name(key: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]", "_", key)


def _private(folder: Path) -> bool:
    """Whether ``folder`` and its parent are this user's alone (a shared temporary folder
    could hold another user's, made to plant requests)."""
    for path in (folder.parent, folder):
        try:
            info = os.lstat(path)
        except FileNotFoundError:
            return True  # made private (0700) when first written
        if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid() or info.st_mode & 0o077:
            return False
    return True


class UnrecordedRequests:
    def __init__(
        self,
        outbox: Outbox,
        lanes: ThreadLanes,
        request_of: Callable[[str], dict[str, Any] | None] = lambda _key: None,
    ) -> None:
        """``request_of``: a request's intake data, by its key."""
        self.outbox = outbox
        self.lanes = lanes
        self._request_of = request_of
        # Where deferred requests outlive the process (none for a ledger kept in memory).
        ledger = outbox.ledger.file
        self._folder = deferred_folder(ledger) if ledger is not None else None
        self._waiting: list[tuple[ThreadRef, Job]] = []
        self._told: set[str] = set()  # the requests whose person was told (intake keys)
        self._kept: set[str] = set()  # the requests kept in the folder (intake keys)

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
        kept = await self._keep(key)
        why = (self.outbox.backlog.problem or "").rpartition(": ")[2] or "the disk is full"
        logger.warning("request %s not recorded (%s): it waits for the disk", key, why)
        notice = NOT_RECORDED.format(why=why) + ("" if kept else UNLESS_RESTARTED)
        await self.outbox.owe(thread, [{"op": "post", "message": notice}])

    async def kept(self) -> list[tuple[str, dict[str, Any]]]:
        """(key, intake data) of each request a stopped bot kept in the folder, oldest
        first: they are this process's to handle now (their people were told already)."""
        if self._folder is None or not _private(self._folder):
            if self._folder is not None:
                logger.warning("%s is not this user's alone: its requests are ignored",
                               self._folder)  # fmt: skip
            return []
        found = []
        for _, data in await Spool(self._folder).entries():
            key, request = data.get("key"), data.get("request")
            if isinstance(key, str) and isinstance(request, dict):
                self._kept.add(key)
                self._told.add(key)
                found.append((key, request))
        return found

    async def _keep(self, key: str) -> bool:
        """Writes the request ``key`` to the folder; whether it is kept there."""
        request = self._request_of(key)
        if request is None:
            return True  # in the ledger already: it is seen, the rest of it was refused
        if self._folder is None:
            return False
        if key in self._kept:
            return True
        try:
            await asyncio.to_thread(self._folder.parent.mkdir, mode=0o700, exist_ok=True)
            if not _private(self._folder):
                logger.warning("%s is not this user's alone: request %s kept in memory only",
                               self._folder, key)  # fmt: skip
                return False
            await Spool(self._folder).put(_name(key), {"key": key, "request": request})
        except (OSError, ValueError) as exc:
            logger.warning("request %s kept in memory only: %s", key, exc)
            return False
        self._kept.add(key)
        return True

    async def handled(self, key: str) -> None:
        """The request ``key`` is handled; a disk that refuses to note it now notes it later."""
        self._told.discard(key)
        ledger = self.outbox.ledger
        await self.outbox.backlog.write(partial(ledger.handled, key), "request handled")
        await self.forget(key)

    async def forget(self, key: str) -> None:
        """The request ``key`` is in the ledger (or handled): its kept copy goes."""
        if key in self._kept and self._folder is not None:
            self._kept.discard(key)
            await Spool(self._folder).drop(_name(key))

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
