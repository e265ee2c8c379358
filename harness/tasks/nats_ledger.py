"""The ledger on NATS JetStream (``store: {kind: nats}``): what bot replicas share of what they
have seen and what they owe threads, in the key-value bucket ``<PREFIX>_LEDGER``:

    seen.<hex key>     {"at"}: a seen key; ``create`` makes the first process's claim win
    intake.<hex key>   {"data", "at"}: a request taken on and not handled yet
    watch.<hex agent>  the watch's data (listed in the order last written)
    ids                written once per owed entry: its revision is the entry's id
    owed.<id>          {"lane", "data", "step", "attempts", "due", "state", "error", ...}
    lane.<hex lane>    {"holder", "until"}: the process delivering the thread, until when

The key-value store has no transaction over several keys, so each step that the SQLite ledger
takes in one is ordered to leave nothing lost when a process stops in its middle: an entry
``owe_once`` stores under a claim is written first and counts only once its claim (the
``seen`` key, ``create``d last, naming the entry) exists; the watch it settles and the request
it handles end after it is stored.

Delivery: ``pending`` claims each thread (lane) it lists for ``claim_seconds`` (renewed by
every listing and write), so one process delivers a thread at a time and in order. A thread
another process holds is listed with its entries due when that claim would expire; a claim
left to expire (its process died) is taken over, the entries counting one more attempt so the
outbox looks for a post the dead process may have made before making it again. Writes are
fenced: a process whose claim was taken over, or whose entry was changed since it read it, is
refused (``LedgerClaimLostError``). A server out of reach raises ``LedgerUnwritableError``
(``problem`` says so), which the bot's backlog keeps and retries like a full disk.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from operator import attrgetter
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from harness.clock import SYSTEM, Clock
from harness.config.store_schema import StoreSettings
from harness.errors import HarnessError
from harness.tasks import nats_json
from harness.tasks.leases import LeasesUnreachableError, NatsLeases, this_process
from harness.tasks.ledger_protocol import JSON, LedgerClaimLostError, LedgerUnwritableError, Owed
from harness.tasks.nats_buckets import CONNECT_FIX, Buckets, nats_failures
from harness.tasks.nats_json import create, dump, hex_key, open_bucket, quietly, unhex
from harness.tasks.nats_kv import remove, scan
from harness.waits import cancel_surely, within

if TYPE_CHECKING:
    from nats.js.kv import KeyValue

logger = logging.getLogger(__name__)
T = TypeVar("T")

CLAIM_SECONDS = 10.0  # how long a thread stays with a process that stopped renewing its claim
PROBE_SECONDS = 1.5  # a probe's wait for the server, within /readyz's bound
TENTATIVE_SECONDS = 60.0  # an entry whose claim was never made is a stopped owe_once's, after this


def _owed(entry_id: int, value: JSON) -> Owed:
    return Owed(entry_id, str(value["lane"]), value["data"], int(value["step"]),
                int(value["attempts"]), float(value["due"]), value.get("error"))  # fmt: skip


class NatsLedger:
    def __init__(
        self,
        settings: StoreSettings,
        clock: Clock = SYSTEM,
        *,
        claim_seconds: float = CLAIM_SECONDS,
        holder: str | None = None,
    ) -> None:
        self.settings = settings
        self.clock = clock
        self.file: Path | None = None
        self.problem: str | None = None
        self.shared = True
        self.claim_seconds = claim_seconds
        # Who this process is in a lane's claim: unique per instance, readable in the bucket.
        self.holder = holder or this_process()
        self._opening: asyncio.Future[tuple[Buckets, KeyValue]] | None = None
        self._claims: dict[str, int] = {}  # lane -> revision of this process's claim on it
        self._known: dict[int, tuple[str, int]] = {}  # entry id -> (lane, revision) as read
        self._closed = False

    @classmethod
    async def open(
        cls, settings: StoreSettings, clock: Clock = SYSTEM, **options: Any
    ) -> NatsLedger:
        """The ledger, connected now rather than on first use."""
        ledger = cls(settings, clock, **options)
        await ledger._call(ledger._bucket, writes=False)
        return ledger

    async def close(self) -> None:
        """Hands its threads on (a dead process's claims expire instead); closes; idempotent."""
        if self._closed:
            return
        self._closed = True
        opening, self._opening = self._opening, None
        if opening is None:
            return
        if not opening.done():  # a NATS connect may lose a cancellation sent once
            await cancel_surely(opening)
        failures: tuple[type[BaseException], ...] = (asyncio.CancelledError, HarnessError)
        failures += nats_failures()
        try:
            buckets, kv = await opening
        except failures:  # never connected: nothing to hand on or close
            return
        try:
            for lane in list(self._claims):
                await self._release(kv, lane)
        except nats_failures() as exc:  # out of reach: the claims expire by themselves
            logger.debug("releasing the ledger's claims: %s", exc)
        await buckets.close()

    # -- seen keys and requests taken on -----------------------------------------------------

    async def remember(
        self,
        keys: Iterable[str],
        at: float | None = None,
        *,
        intake: Mapping[str, JSON] | None = None,
    ) -> None:
        when = self._now() if at is None else at

        async def write(kv: KeyValue) -> None:
            # The requests first: a stop in between leaves one taken on, never one only seen.
            for key, data in (intake or {}).items():
                await create(kv, f"intake.{hex_key(key)}", {"data": data, "at": when})
            for key in keys:
                await create(kv, f"seen.{hex_key(key)}", {"at": when})

        await self._call(write)

    async def intake(self) -> list[tuple[str, JSON, float]]:
        found = await self._call(lambda kv: self._scan("intake.>"), writes=False)
        rows = [(unhex(key[7:]), value["data"], float(value["at"]), rev)
                for key, (rev, value) in found.items()]  # fmt: skip
        return [(key, data, at) for key, data, at, _ in sorted(rows, key=lambda r: (r[2], r[3]))]

    async def annotate_intake(self, key: str, **fields: Any) -> None:
        def change(value: JSON) -> JSON:
            return {**value, "data": {**value["data"], **fields}}

        await self._call(lambda kv: nats_json.change(kv, f"intake.{hex_key(key)}", change))

    async def handled(self, key: str) -> None:
        await self._call(lambda kv: self._remove(f"intake.{hex_key(key)}"))

    async def claim(self, key: str, *, intake: tuple[str, JSON] | None = None) -> bool:
        async def first(kv: KeyValue) -> bool:
            now = self._now()
            if not await create(kv, f"seen.{hex_key(key)}", {"at": now}):
                return False
            if intake is not None:
                await create(kv, f"intake.{hex_key(intake[0])}", {"data": intake[1], "at": now})
            return True

        return await self._call(first)

    async def claimed(self, key: str) -> bool:
        return bool(await self._call(lambda kv: self._scan(f"seen.{hex_key(key)}"), writes=False))

    async def recent(self, since: float) -> list[tuple[str, float]]:
        async def read(kv: KeyValue) -> list[tuple[str, float]]:
            rows: list[tuple[float, int, str]] = []
            for key, (rev, value) in (await self._scan("seen.>")).items():
                if float(value["at"]) < since:
                    await self._remove(key)
                else:
                    rows.append((float(value["at"]), rev, unhex(key[5:])))
            return [(key, at) for at, _, key in sorted(rows)]

        return await self._call(read, writes=False)

    # -- watches ---------------------------------------------------------------------------

    async def watch(self, agent_id: str, data: JSON, *, handles: str | None = None) -> None:
        async def write(kv: KeyValue) -> None:
            await kv.put(f"watch.{hex_key(agent_id)}", dump(data))
            if handles is not None:
                await self._remove(f"intake.{hex_key(handles)}")

        await self._call(write)

    async def watches(self) -> list[tuple[str, JSON]]:
        found = await self._call(lambda kv: self._scan("watch.>"), writes=False)
        ordered = sorted(found.items(), key=lambda item: item[1][0])
        return [(unhex(key[6:]), value) for key, (_, value) in ordered]

    async def unwatch(self, agent_id: str) -> None:
        await self._call(lambda kv: self._remove(f"watch.{hex_key(agent_id)}"))

    # -- the outbox ------------------------------------------------------------------------

    async def owe(
        self, lane: str, data: JSON, *, settles: str | None = None, handles: str | None = None
    ) -> int:
        entry_id = await self.owe_once(None, lane, data, settles=settles, handles=handles)
        assert entry_id is not None
        return entry_id

    async def owe_once(
        self,
        claim: str | None,
        lane: str,
        data: JSON,
        *,
        settles: str | None = None,
        handles: str | None = None,
        drops: Sequence[int] = (),
    ) -> int | None:
        async def write(kv: KeyValue) -> int | None:
            now = self._now()
            entry_id = await kv.put("ids", b"")
            value = {"lane": lane, "data": data, "step": 0, "attempts": 0, "due": now,
                     "state": "pending", "error": None, "created": now}  # fmt: skip
            if claim is not None:
                value["claim"] = claim
            revision = await kv.create(f"owed.{entry_id}", dump(value))
            if claim is not None:
                if not await create(kv, f"seen.{hex_key(claim)}", {"at": now, "owed": entry_id}):
                    await self._remove(f"owed.{entry_id}")
                    await self._drop(drops)
                    return None
                del value["claim"]  # made: the entry counts without looking at its claim
                revision = await quietly(
                    kv.update(f"owed.{entry_id}", dump(value), last=revision), revision
                )
            self._known[entry_id] = (lane, revision)
            await self._drop(drops)
            if settles is not None:
                await self._remove(f"watch.{hex_key(settles)}")
            if handles is not None:
                await self._remove(f"intake.{hex_key(handles)}")
            return entry_id

        return await self._call(write)

    async def pending(self) -> list[Owed]:
        async def read(kv: KeyValue) -> list[Owed]:
            lanes: dict[str, list[tuple[Owed, int, JSON]]] = {}
            for owed, rev, value in await self._entries(kv, "pending"):
                lanes.setdefault(owed.lane, []).append((owed, rev, value))
            for lane in set(self._claims) - set(lanes):  # delivered: the thread is free again
                await self._release(kv, lane)
            listed: list[Owed] = []
            for lane, entries in lanes.items():
                until, taken = await self._hold(kv, lane)
                for owed, rev, value in entries:
                    if until is not None:  # another process's until its claim expires
                        self._known.pop(owed.id, None)
                        listed.append(_later(owed, until))
                        continue
                    if taken:  # its holder stopped mid-delivery: one more attempt, recheck
                        value = {**value, "attempts": owed.attempts + 1}
                        rev = await quietly(kv.update(f"owed.{owed.id}", dump(value), last=rev), 0)
                        if not rev:  # its old holder wrote it meanwhile: read again soon
                            listed.append(_later(owed, self._now() + 1.0))
                            continue
                        owed = _owed(owed.id, value)
                    self._known[owed.id] = (lane, rev)
                    listed.append(owed)
            return sorted(listed, key=lambda owed: owed.id)

        return await self._call(read, writes=False)

    async def failed(self) -> list[Owed]:
        entries = await self._call(lambda kv: self._entries(kv, "failed"), writes=False)
        return [owed for owed, _, _ in entries]

    async def advance(self, entry_id: int, step: int) -> None:
        await self._call(lambda kv: self._fenced(kv, entry_id, lambda v: {**v, "step": step}))

    async def postpone(self, entry_id: int, due: float, error: str) -> None:
        def change(value: JSON) -> JSON:
            return {**value, "attempts": value["attempts"] + 1, "due": due, "error": error}

        await self._call(lambda kv: self._fenced(kv, entry_id, change))

    async def give_up(self, entry_id: int, error: str) -> None:
        def change(value: JSON) -> JSON:
            return {**value, "state": "failed", "error": error, "attempts": value["attempts"] + 1}

        await self._call(lambda kv: self._fenced(kv, entry_id, change))

    async def delivered(self, entry_id: int) -> None:
        await self._call(lambda kv: self._fenced(kv, entry_id, None))

    async def probe(self) -> None:
        # Bounded: a server out of reach is a refusal the caller hears of soon (``/readyz``).
        probe = dump({"at": self._now()})
        await self._call(lambda kv: within(kv.put("probe", probe), PROBE_SECONDS))

    # -- claims on threads -----------------------------------------------------------------

    async def _hold(self, kv: KeyValue, lane: str) -> tuple[float | None, bool]:
        """Claims ``lane`` for this process (made, renewed, or taken over once expired):
        (None, whether it was taken over from another) when held, else (when the other
        process's claim expires, False)."""
        grant = await NatsLeases(kv, self.clock, prefix="lane.").take(
            lane, self.holder, self.claim_seconds
        )
        if grant.token is None:
            self._claims.pop(lane, None)
            return grant.until, False
        self._claims[lane] = grant.token
        return None, grant.previous is not None

    async def _release(self, kv: KeyValue, lane: str) -> None:
        token = self._claims.pop(lane, None)
        if token is not None:
            await NatsLeases(kv, self.clock, prefix="lane.").release(lane, token)

    async def _fenced(
        self, kv: KeyValue, entry_id: int, change: Callable[[JSON], JSON] | None
    ) -> None:
        """``change`` of an entry (None: it is delivered), refused unless this process holds
        its thread and the entry is as it last read it."""
        from nats.js.errors import KeyWrongLastSequenceError, NotFoundError

        key = f"owed.{entry_id}"
        try:
            entry = await kv.get(key)
        except NotFoundError:
            entry = None
        if entry is None or not entry.value or entry.revision is None:
            self._known.pop(entry_id, None)
            raise LedgerClaimLostError(f"outbox entry {entry_id} is no longer owed")
        value = json.loads(entry.value)
        # As this process last read or wrote it: a change since (another's) refuses the write.
        last = self._known[entry_id][1] if entry_id in self._known else entry.revision
        until, _ = await self._hold(kv, value["lane"])
        if until is not None:
            self._known.pop(entry_id, None)
            raise LedgerClaimLostError(
                f"another process delivers thread {value['lane']} now (outbox entry {entry_id})"
            )
        revision = None
        try:
            if change is None:
                done = await nats_json.delete(kv, key, last)
            else:
                revision = await kv.update(key, dump(change(value)), last=last)
                done = True
        except KeyWrongLastSequenceError:
            done = False
        if not done:
            self._known.pop(entry_id, None)
            raise LedgerClaimLostError(f"outbox entry {entry_id} was changed by another process")
        if revision is not None:
            self._known[entry_id] = (value["lane"], revision)
            return
        await self._remove(key)  # the delete's marker: nothing to keep
        self._known.pop(entry_id, None)
        if not any(lane == value["lane"] for lane, _ in self._known.values()):
            await self._release(kv, value["lane"])

    # -- reading and the connection ----------------------------------------------------------

    async def _entries(self, kv: KeyValue, state: str) -> list[tuple[Owed, int, JSON]]:
        """The outbox entries in ``state``, oldest first; a stopped ``owe_once``'s removed."""
        found: list[tuple[Owed, int, JSON]] = []
        for key, (rev, value) in (await self._scan("owed.>")).items():
            entry_id = int(key[5:])
            if "claim" in value and not await self._made(kv, entry_id, value):
                continue
            if value["state"] == state:
                found.append((_owed(entry_id, value), rev, value))
        return sorted(found, key=lambda item: item[0].id)

    async def _made(self, kv: KeyValue, entry_id: int, value: JSON) -> bool:
        """Whether the claim of an entry ``owe_once`` stored was made for it."""
        from nats.js.errors import NotFoundError

        try:
            seen = await kv.get(f"seen.{hex_key(value['claim'])}")
            if seen.value and json.loads(seen.value).get("owed") == entry_id:
                return True
        except NotFoundError:
            pass
        if float(value["created"]) < self._now() - TENTATIVE_SECONDS:
            await self._remove(f"owed.{entry_id}")
        return False

    async def _drop(self, entry_ids: Sequence[int]) -> None:
        for entry_id in entry_ids:
            await self._remove(f"owed.{entry_id}")
            self._known.pop(entry_id, None)

    async def _scan(self, pattern: str) -> dict[str, tuple[int, JSON]]:
        buckets, _ = await self._kv()
        found = await scan(buckets.js, buckets.names.ledger, pattern)
        return {key: (rev, json.loads(value)) for key, (rev, value) in found.items() if value}

    async def _remove(self, key: str) -> None:
        buckets, _ = await self._kv()
        await remove(buckets.js, buckets.names.ledger, key)

    def _now(self) -> float:
        return self.clock.now().timestamp()

    async def _bucket(self, kv: KeyValue) -> KeyValue:
        return kv

    async def _kv(self) -> tuple[Buckets, KeyValue]:
        if self._opening is None or (self._opening.done() and self._opening.exception()):
            self._opening = asyncio.ensure_future(open_bucket(self.settings, attrgetter("ledger")))
        return await asyncio.shield(self._opening)

    async def _call(self, fn: Callable[[KeyValue], Awaitable[T]], *, writes: bool = True) -> T:
        """``fn`` on the bucket; the server out of reach raises ``LedgerUnwritableError``
        (and sets ``problem`` until a write succeeds again)."""
        if self._closed:
            raise RuntimeError("the ledger is closed")
        failure: BaseException | None
        try:
            try:
                _, kv = await self._kv()
            except HarnessError as exc:  # not connected: refused alike
                raise LeasesUnreachableError(str(exc).partition(": ")[2]) from exc
            result = await fn(kv)
        except LeasesUnreachableError as exc:  # a thread's claim out of reach, or the server
            failure, why = exc, str(exc)
        except (HarnessError, asyncio.CancelledError):
            raise
        except nats_failures() as exc:
            failure = exc
            why = "no answer" if isinstance(exc, TimeoutError) else str(exc) or type(exc).__name__
        else:
            failure = None
        if failure is not None:
            if self.problem is None:
                logger.warning(
                    "the ledger at NATS %s cannot be written: %s", self.settings.url, why
                )
            self.problem = f"the ledger at NATS {self.settings.url} cannot be reached: {why}"
            raise LedgerUnwritableError(self.problem, fix=CONNECT_FIX) from failure
        if writes and self.problem is not None:
            logger.warning("the ledger at NATS %s is writable again", self.settings.url)
            self.problem = None
        return result


def _later(owed: Owed, until: float) -> Owed:
    return Owed(owed.id, owed.lane, owed.data, owed.step, owed.attempts,
                max(owed.due, until), owed.error)  # fmt: skip
