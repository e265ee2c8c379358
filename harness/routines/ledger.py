"""The firing ledger: each firing of a routine (a schedule's slot, a GitHub delivery, a call)
is claimed once, first one wins, so it starts one task whatever the number of bot processes,
restarts or re-deliveries.

``FileFiringLedger`` claims by creating a file with O_EXCL (one machine, or a folder the bot's
processes share); ``NatsFiringLedger`` by ``kv.create`` on a JetStream key-value bucket, which
fails when the key exists (bot processes on several machines, `runtime: nats`). Claims are kept
``KEEP_DAYS``: a firing older than that is never claimed again anyway (no catch-up reaches it).
The file ledger forgets older claims of a routine as it claims, at most once a day; the NATS
bucket's keys expire.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from harness.clock import SYSTEM, Clock
from harness.errors import HarnessError

if TYPE_CHECKING:
    from nats.js.kv import KeyValue

    from harness.config.settings import RuntimeSettings
    from harness.runtime.nats_link import NatsLink

KEEP_DAYS = 30
_DAY = 86400.0


class FiringLedger(Protocol):
    async def claim(self, routine: str, firing_key: str, owner: str = "") -> bool:
        """True for the one caller that claims this firing first (kept as ``owner``); False
        for every other."""
        ...

    async def owner(self, routine: str, firing_key: str) -> str | None:
        """Who claimed the firing (the ``owner`` its claim gave), or None when unclaimed."""
        ...


def _value(owner: str, firing_key: str) -> bytes:
    # The owner first, then the key (for whoever reads the store): both bounded.
    return f"{owner[:100]}\n{firing_key}".encode("utf-8", "replace")[:600]


def _owner(value: bytes) -> str:
    return value.decode("utf-8", "replace").partition("\n")[0]


def _digest(routine: str, firing_key: str) -> str:
    # Keys come from outside (a delivery id): hashed, they are safe as a file or a NATS key.
    return hashlib.sha256(f"{routine}\0{firing_key}".encode()).hexdigest()[:40]


class FileFiringLedger:
    def __init__(self, folder: Path, clock: Clock = SYSTEM) -> None:
        self.folder = folder
        self._clock = clock  # its wall time: what claims are old enough to forget
        self._pruned: dict[str, float] = {}  # routine -> when its old claims were last let go

    def _claim(self, routine: str, firing_key: str, owner: str) -> bool:
        folder = self.folder / routine
        folder.mkdir(parents=True, exist_ok=True)
        try:
            fd = os.open(
                folder / _digest(routine, firing_key), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644
            )
        except FileExistsError:
            return False
        except OSError as exc:
            raise HarnessError(
                f"cannot record a firing of routine {routine} in {folder}: {exc}",
                fix="free space or fix the permissions of the task store's folder",
            ) from exc
        now = self._clock.now().timestamp()
        try:
            os.write(fd, _value(owner, firing_key))
            os.utime(fd, (now, now))  # the claim's time is the clock's, as the cutoff's
        finally:
            os.close(fd)
        if self._pruned.get(routine, -_DAY) <= now - _DAY:
            self._pruned[routine] = now
            self._prune(routine, now - KEEP_DAYS * _DAY)
        return True

    def _prune(self, routine: str, cutoff: float) -> None:
        """The routine's claims made before ``cutoff`` (epoch seconds) let go."""
        try:
            entries = list(os.scandir(self.folder / routine))
        except FileNotFoundError:
            return
        for entry in entries:
            try:
                if entry.stat().st_mtime < cutoff:
                    os.unlink(entry.path)
            except OSError:
                continue

    async def claim(self, routine: str, firing_key: str, owner: str = "") -> bool:
        return await asyncio.to_thread(self._claim, routine, firing_key, owner)

    def _owner(self, routine: str, firing_key: str) -> str | None:
        try:
            return _owner((self.folder / routine / _digest(routine, firing_key)).read_bytes())
        except FileNotFoundError:
            return None

    async def owner(self, routine: str, firing_key: str) -> str | None:
        return await asyncio.to_thread(self._owner, routine, firing_key)


class NatsFiringLedger:
    def __init__(self, bucket: KeyValue) -> None:
        self.bucket = bucket

    @classmethod
    async def open(cls, js: object, name: str) -> NatsFiringLedger:
        """The ledger on bucket ``name`` (made on first use, its keys kept ``KEEP_DAYS``)."""
        from nats.js.api import KeyValueConfig
        from nats.js.client import JetStreamContext
        from nats.js.errors import BucketNotFoundError

        assert isinstance(js, JetStreamContext)
        try:
            bucket = await js.key_value(name)
        except BucketNotFoundError:
            bucket = await js.create_key_value(
                KeyValueConfig(bucket=name, history=1, ttl=KEEP_DAYS * 86400.0)
            )
        return cls(bucket)

    async def claim(self, routine: str, firing_key: str, owner: str = "") -> bool:
        from nats.js.errors import KeyWrongLastSequenceError

        try:
            await self.bucket.create(
                f"{routine}.{_digest(routine, firing_key)}", _value(owner, firing_key)
            )
        except KeyWrongLastSequenceError:
            return False
        return True

    async def owner(self, routine: str, firing_key: str) -> str | None:
        from nats.js.errors import KeyNotFoundError

        try:
            entry = await self.bucket.get(f"{routine}.{_digest(routine, firing_key)}")
        except KeyNotFoundError:
            return None
        return _owner(entry.value or b"")


async def open_ledger(
    runtime: RuntimeSettings, folder: Path
) -> tuple[FiringLedger, NatsLink | None]:
    """The ledger the bot's processes share, and the connection to close after it: with
    `runtime: nats` the bot may run on several machines, so firings are claimed in NATS's
    key-value store (its own connection, bucket ``<PREFIX>_ROUTINES``); else in ``folder``."""
    if runtime.kind != "nats":
        return FileFiringLedger(folder), None
    from harness.runtime.nats_link import NatsLink, NatsSettings

    assert runtime.url is not None  # the config's validation requires it for `nats`
    settings = NatsSettings(runtime.url, runtime.credentials, runtime.tls_ca, runtime.prefix)
    link = await NatsLink.connect(settings, name="harness-routines")
    bucket = runtime.prefix.upper().replace(".", "_").replace("-", "_") + "_ROUTINES"
    try:
        return await NatsFiringLedger.open(link.js, bucket), link
    except BaseException:
        await link.close()
        raise
