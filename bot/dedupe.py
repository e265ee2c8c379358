"""What the bot has already seen: Slack delivers at least once, and retries for an hour.

Keys (event ids, handled messages) are answered from memory at once, so a duplicate never
slips in between two awaits, and kept in the ledger, so a delivery that comes again after a
restart is still recognised.

With a ledger bot replicas share, a retry (or the ``app_mention`` of a ``message``) may reach
another replica than the first delivery: ``claim`` creates each key there first, atomically,
before the event is decided, and a key another replica created first counts as seen here.
Memory stays the fast path for repeats within one process.
"""

from __future__ import annotations

import asyncio
import logging
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterable, Mapping
from typing import Any

from bot.parsing import UserMessage, parse_message_event
from bot.unrecorded import intake_key
from harness.clock import SYSTEM, Clock
from harness.tasks.ledger import Ledger, LedgerUnwritableError

logger = logging.getLogger(__name__)


class TtlSet:
    """``add(key)`` is True the first time a key is seen within ``ttl`` seconds."""

    def __init__(
        self,
        ttl: float,
        *,
        max_size: int = 200_000,
        clock: Callable[[], float] = SYSTEM.monotonic,
    ) -> None:
        self.ttl = ttl
        self.max_size = max_size
        self._clock = clock
        self._seen: OrderedDict[Hashable, float] = OrderedDict()

    def add(self, key: Hashable, at: float | None = None) -> bool:
        """Seen at ``at`` (now by default; keys must come oldest first)."""
        now = self._clock()
        self._expire(now)
        if key in self._seen:
            return False
        self._seen[key] = now if at is None else at
        while len(self._seen) > self.max_size:
            self._seen.popitem(last=False)
        return True

    def __contains__(self, key: Hashable) -> bool:
        self._expire(self._clock())
        return key in self._seen

    def _expire(self, now: float) -> None:
        while self._seen:
            key, seen_at = next(iter(self._seen.items()))
            if now - seen_at < self.ttl:
                return
            del self._seen[key]


class Dedupe:
    """Keys are kept ``keep`` seconds of ``clock``'s wall time: the ledger's times, which
    outlive a restart (the ledger's own clock by default, so the two agree)."""

    def __init__(self, ledger: Ledger, keep: float, clock: Clock | None = None):
        self.ledger = ledger
        self.keep = keep
        self._clock = clock or ledger.clock
        self._seen = TtlSet(keep, clock=self._now)
        self._unsaved: list[str] = []
        self._intake: dict[str, dict[str, Any]] = {}
        self._saving = asyncio.Lock()
        # Keys being claimed in the shared ledger now: a second delivery waits for the first.
        self._claiming: dict[str, asyncio.Future[None]] = {}

    async def load(self) -> None:
        """What the ledger remembers of the last ``keep`` seconds."""
        for key, at in await self.ledger.recent(self._now() - self.keep):
            self._seen.add(key, at)

    def _now(self) -> float:
        return self._clock.now().timestamp()

    def first_time(self, key: str) -> bool:
        """True the first time ``key`` is seen (then ``save`` makes that last)."""
        if not self._seen.add(key):
            return False
        self._unsaved.append(key)
        return True

    async def claim(self, keys: Iterable[str]) -> None:
        """With a shared ledger: each of ``keys`` not seen here is claimed there, in order
        (created, or found created by another replica: then it and every key after it count
        as seen, and ``first_time`` says so). Nothing with a ledger of one process. A ledger
        out of reach answers nothing: the keys are decided here alone, as with one process,
        rather than dropped."""
        if not self.ledger.shared:
            return
        keys = list(keys)
        for n, key in enumerate(keys):
            if key in self._seen:
                continue
            claiming = self._claiming.get(key)
            if claiming is not None:  # a repeat in this process: memory decides after it
                await asyncio.shield(claiming)
                continue
            self._claiming[key] = claiming = asyncio.get_running_loop().create_future()
            try:
                won = await self.ledger.claim(key)
            except LedgerUnwritableError as exc:
                logger.warning("could not claim %s across replicas: %s", key, exc.message)
                won = True
            finally:
                del self._claiming[key]
                if not claiming.done():
                    claiming.set_result(None)
            if not won:  # another replica has it, and so the whole delivery: claiming the
                # rest could win a key from that replica's claim in flight, and neither
                # replica would run the message.
                for taken in keys[n:]:
                    self._seen.add(taken)
                return

    def seen(self, key: str) -> bool:
        """Whether ``key`` was seen (in this process, or in the ledger at ``load``)."""
        return key in self._seen

    def unsaved(self, key: str) -> dict[str, Any] | None:
        """The request ``key`` taken on and not yet in the ledger (its intake data)."""
        return self._intake.get(key)

    def take_in(self, key: str, data: dict[str, Any]) -> None:
        """The request ``key`` will be acted on: saved with the seen keys, so a stop before
        it is handled leaves it to the next start rather than marked seen and lost."""
        self._intake[key] = data

    async def save(self) -> bool:
        """Every key seen (and request taken on) before the call is in the ledger when it
        returns True; False when the ledger could not take them (its disk is full): they are
        kept for the next save."""
        async with self._saving:
            keys, self._unsaved = self._unsaved, []
            intake, self._intake = self._intake, {}
            if not (keys or intake):
                return True
            try:
                await self.ledger.remember(keys, intake=intake)
            except LedgerUnwritableError:
                self._unsaved = keys + self._unsaved
                self._intake = {**intake, **self._intake}
                return False
            return True


def event_keys(event: Mapping[str, Any], event_id: str | None, bot_user_id: str) -> list[str]:
    """The keys ``Conversations.on_message_event`` decides a message event by: its event id,
    and the message it carries (one message comes as ``message`` and ``app_mention``)."""
    keys = [f"event:{event_id}"] if event_id else []
    parsed = parse_message_event(event, bot_user_id)
    if isinstance(parsed, UserMessage):
        keys.append(intake_key(parsed))
    return keys
