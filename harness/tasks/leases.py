"""Leases: one holder at a time for a named job (the routines' scheduler, following pull
requests, recovering unfinished work, keeping spares), held for ``ttl`` seconds and renewed
by its holder; a holder that stops renewing loses it when its ``ttl`` runs out, and another
may take it.

A grant's token is a fencing token: it changes with every acquire and renewal, and
``renew`` / ``release`` with a token that is no longer the current one are refused (None):
a holder that was paused past its ``ttl`` and replaced learns so at its next renewal.

- ``LocalLeases``: in this process (the file store: one process).
- ``NatsLeases``: in a JetStream key-value bucket (``<PREFIX>_LEASES``, or a key prefix in
  another bucket: the ledger's claims on threads), shared by every process on the server.
  ``create`` takes a free lease, ``update(last=token)`` renews it or takes it over once its
  stored deadline passed, so two takers never both win. Deadlines are read against the
  injected clock: the replicas' clocks must agree to well within a ``ttl`` (NTP does).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import logging
import os
import socket
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, TypeVar

from harness.clock import SYSTEM, Clock
from harness.config.store_schema import StoreSettings
from harness.errors import HarnessError
from harness.retry import Backoff, retrying
from harness.tasks import nats_json
from harness.tasks.nats_buckets import CONNECT_FIX, Buckets, nats_failures
from harness.waits import stop_task

if TYPE_CHECKING:
    from nats.js.kv import KeyValue

logger = logging.getLogger(__name__)
T = TypeVar("T")
# A NATS call that fails is tried again this soon, for at most a third of the lease's ttl.
RETRY = Backoff(first=0.1, cap=1.0)


class LeasesUnreachableError(HarnessError):
    """The NATS server of the leases did not answer (after retries for a third of a ttl)."""


@dataclass(frozen=True)
class Holding:
    """Who holds a lease, until when (epoch seconds of the clock's wall time), its token."""

    holder: str
    until: float
    token: int


@dataclass(frozen=True)
class Grant:
    """What an attempt to take a lease got: ``token`` (None: another holds it, ``until``),
    and ``previous``: the holder it was taken over from once their ttl ran out."""

    token: int | None
    until: float
    previous: str | None = None


class Lease(Protocol):
    async def acquire(self, name: str, holder: str, ttl: float) -> int | None:
        """The lease for ``holder`` for ``ttl`` s (renewed when it holds it already): its
        token, or None while another holds it."""
        ...

    async def renew(self, name: str, token: int, ttl: float) -> int | None:
        """Another ``ttl`` s for the holder of ``token``: the new token, None when lost."""
        ...

    async def release(self, name: str, token: int) -> None:
        """Gives up the lease (nothing when ``token`` no longer holds it)."""

    async def holder(self, name: str) -> Holding | None:
        """Who holds the lease now; None when nobody does (never taken, released, expired)."""
        ...

    async def close(self) -> None: ...


class LocalLeases:
    """Leases in this process (one process keeps the file store)."""

    def __init__(self, clock: Clock = SYSTEM) -> None:
        self.clock = clock
        self._held: dict[str, Holding] = {}
        self._tokens = itertools.count(1)

    async def acquire(self, name: str, holder: str, ttl: float) -> int | None:
        return self.take(name, holder, ttl).token

    def take(self, name: str, holder: str, ttl: float) -> Grant:
        now = self.clock.now().timestamp()
        held = self._held.get(name)
        if held is not None and held.holder != holder and held.until > now:
            return Grant(None, held.until)
        self._held[name] = Holding(holder, now + ttl, next(self._tokens))
        previous = held.holder if held is not None and held.holder != holder else None
        return Grant(self._held[name].token, now + ttl, previous)

    async def renew(self, name: str, token: int, ttl: float) -> int | None:
        held = self._held.get(name)
        if held is None or held.token != token:
            return None
        return self.take(name, held.holder, ttl).token

    async def release(self, name: str, token: int) -> None:
        held = self._held.get(name)
        if held is not None and held.token == token:
            del self._held[name]

    async def holder(self, name: str) -> Holding | None:
        held = self._held.get(name)
        return held if held is not None and held.until > self.clock.now().timestamp() else None

    async def close(self) -> None:
        return None


class NatsLeases:
    """Leases as keys ``<prefix><hex name>`` of a key-value bucket, valued {holder, until}.
    ``open`` connects to the store's server with a bucket of their own; the ledger passes
    its bucket and connection instead (``kv``)."""

    def __init__(
        self,
        kv: KeyValue,
        clock: Clock = SYSTEM,
        *,
        prefix: str = "lease.",
        buckets: Buckets | None = None,
    ) -> None:
        self.kv = kv
        self.clock = clock
        self.prefix = prefix
        self._buckets = buckets  # the connection to close, when the leases opened it

    @classmethod
    async def open(cls, settings: StoreSettings, clock: Clock = SYSTEM) -> NatsLeases:
        buckets, kv = await nats_json.open_bucket(settings, lambda names: names.leases)
        return cls(kv, clock, buckets=buckets)

    async def close(self) -> None:
        if self._buckets is not None:
            await self._buckets.close()

    async def acquire(self, name: str, holder: str, ttl: float) -> int | None:
        return (await self.take(name, holder, ttl)).token

    async def take(self, name: str, holder: str, ttl: float) -> Grant:
        """``acquire``, saying who holds it otherwise and whom it was taken over from."""
        from nats.js.errors import KeyWrongLastSequenceError

        async def attempt() -> Grant:
            key, now = self._key(name), self._now()
            mine = nats_json.dump({"holder": holder, "until": now + ttl})
            found = await nats_json.read(self.kv, key)
            try:
                if found is None:
                    return Grant(await self.kv.create(key, mine), now + ttl)
                held, revision = found
                if held["holder"] != holder and float(held["until"]) > now:
                    return Grant(None, float(held["until"]))
                token = await self.kv.update(key, mine, last=revision)
            except KeyWrongLastSequenceError:  # another taker got there first
                return Grant(None, now + ttl)
            return Grant(token, now + ttl, held["holder"] if held["holder"] != holder else None)

        return await self._retried(attempt, ttl)

    async def renew(self, name: str, token: int, ttl: float) -> int | None:
        from nats.js.errors import KeyWrongLastSequenceError, NotFoundError

        async def attempt() -> int | None:
            key = self._key(name)
            try:
                entry = await self.kv.get(key)
            except NotFoundError:
                return None
            if entry.revision != token or not entry.value:
                return None
            held = json.loads(entry.value)
            value = nats_json.dump({"holder": held["holder"], "until": self._now() + ttl})
            try:
                return await self.kv.update(key, value, last=token)
            except KeyWrongLastSequenceError:
                return None

        return await self._retried(attempt, ttl)

    async def release(self, name: str, token: int) -> None:
        await self._retried(lambda: nats_json.delete(self.kv, self._key(name), token), 3.0)

    async def holder(self, name: str) -> Holding | None:
        found = await self._retried(lambda: nats_json.read(self.kv, self._key(name)), 3.0)
        if found is None or float(found[0]["until"]) <= self._now():
            return None
        return Holding(str(found[0]["holder"]), float(found[0]["until"]), found[1])

    def _key(self, name: str) -> str:
        return self.prefix + nats_json.hex_key(name)

    def _now(self) -> float:
        return self.clock.now().timestamp()

    async def _retried(self, attempt: Callable[[], Awaitable[T]], ttl: float) -> T:
        from nats.js.errors import KeyWrongLastSequenceError

        def transient(exc: BaseException) -> bool:
            return not isinstance(exc, KeyWrongLastSequenceError)

        try:
            return await retrying(attempt, retry_on=nats_failures(), backoff=RETRY,
                                  retry_if=transient, within=ttl / 3, attempts=5,
                                  clock=self.clock.monotonic)  # fmt: skip
        except nats_failures() as exc:
            why = "no answer" if isinstance(exc, TimeoutError) else str(exc) or type(exc).__name__
            raise LeasesUnreachableError(f"the leases' NATS server cannot be reached: {why}",
                                         fix=CONNECT_FIX) from exc  # fmt: skip


def this_process() -> str:
    """A holder's name for this process: its machine and pid, and a random part (a pid is
    reused; a container's is often 1)."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


class LeaseKeeper:
    """The leases one process holds, each renewed every third of its ttl until released,
    or lost (another took it after a renewal failed for a whole ttl): ``on_lost`` is told,
    and the singleton stops. The leases are opened (connected) at the first ``hold``."""

    def __init__(
        self,
        opener: Callable[[], Awaitable[Lease]],
        *,
        holder: str | None = None,
        clock: Clock = SYSTEM,
    ) -> None:
        self.holder = holder or this_process()
        self.clock = clock
        self._opener = opener
        self._leases: Lease | None = None
        self._tokens: dict[str, int] = {}
        self._renewing: dict[str, asyncio.Task[None]] = {}

    def held(self) -> list[str]:
        """The names of the leases held now (for /readyz)."""
        return sorted(self._tokens)

    async def hold(
        self, name: str, ttl: float, on_lost: Callable[[str], None] | None = None
    ) -> bool:
        """Takes the lease ``name`` and keeps renewing it; False while another holds it."""
        if name in self._tokens:
            return True
        if self._leases is None:
            self._leases = await self._opener()
        token = await self._leases.acquire(name, self.holder, ttl)
        if token is None:
            return False
        self._tokens[name] = token
        renewing = self._renew(self._leases, name, ttl, on_lost or (lambda _name: None))
        self._renewing[name] = asyncio.get_running_loop().create_task(renewing)
        return True

    async def _renew(
        self, leases: Lease, name: str, ttl: float, on_lost: Callable[[str], None]
    ) -> None:
        renewed_at = self.clock.monotonic()
        me = asyncio.current_task()
        while True:
            await asyncio.sleep(ttl / 3)
            try:
                token = await leases.renew(name, self._tokens[name], ttl)
            except LeasesUnreachableError as exc:  # still held until its ttl runs out
                logger.warning("renewing the lease %s: %s", name, exc)
                token = None if self.clock.monotonic() - renewed_at >= ttl else -1
            # Released meanwhile: a cancellation a NATS call swallowed while the server was
            # away must not keep this renewing (and ``release`` waiting) for ever.
            if self._renewing.get(name) is not me:
                return
            if token == -1:
                continue
            if token is None:
                logger.warning("the lease %s was lost: another process holds it now", name)
                del self._tokens[name], self._renewing[name]
                on_lost(name)
                return
            self._tokens[name], renewed_at = token, self.clock.monotonic()

    async def release(self, name: str) -> None:
        renewing = self._renewing.pop(name, None)
        if renewing is not None:
            await stop_task(renewing)
        token = self._tokens.pop(name, None)
        if token is not None and self._leases is not None:
            with contextlib.suppress(LeasesUnreachableError):  # it expires by itself
                await self._leases.release(name, token)

    async def close(self) -> None:
        """Releases every lease held (another process takes them at once) and closes."""
        for name in list(self._tokens):
            await self.release(name)
        if self._leases is not None:
            await self._leases.close()
            self._leases = None
