"""The NATS store's notes: a key-value bucket ``<P>_MEMORY`` beside the task store's
(``harness/tasks/nats_buckets.py``), one key per scope, ``scope.<hex of the scope>``, on
the task store's own connection. A change is a compare-and-set, tried again while another
process (a second bot, ``harness memory`` in a terminal) gets there first."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from harness.memory.model import Note, NoteError
from harness.memory.store import Change, DamagedMemoryError, dump_notes, parse_notes
from harness.tasks.nats_json import hex_key, unhex
from harness.tasks.nats_kv import MAX_CONFLICTS, scan

if TYPE_CHECKING:
    from nats.js.kv import KeyValue

    from harness.tasks.nats_buckets import Buckets

logger = logging.getLogger(__name__)

_PREFIX = "scope."


def _key(scope: str) -> str:
    return _PREFIX + hex_key(scope)


class NatsMemoryStore:
    """``buckets``: the task store's connection (``NatsTaskStore.buckets``), which it closes."""

    def __init__(self, buckets: Callable[[], Awaitable[Buckets]]) -> None:
        self._buckets = buckets
        self._opening: asyncio.Future[KeyValue] | None = None

    async def _kv(self) -> KeyValue:
        loop = asyncio.get_running_loop()
        opening = self._opening
        if (
            opening is None
            or opening.get_loop() is not loop
            or (opening.done() and opening.exception() is not None)
        ):
            opening = self._opening = asyncio.ensure_future(self._open())
        return await asyncio.shield(opening)

    async def _open(self) -> KeyValue:
        from nats.js.api import KeyValueConfig
        from nats.js.errors import BucketNotFoundError

        buckets = await self._buckets()
        try:
            return await buckets.js.key_value(buckets.names.memory)
        except BucketNotFoundError:
            config = KeyValueConfig(bucket=buckets.names.memory, history=1)
            return await buckets.js.create_key_value(config)

    async def _read(self, kv: KeyValue, scope: str) -> tuple[tuple[Note, ...], int | None]:
        from nats.js.errors import NotFoundError

        try:
            entry = await kv.get(_key(scope))
        except NotFoundError:
            return (), None
        if not entry.value:
            return (), entry.revision
        where = f"NATS key {entry.key} of bucket {entry.bucket}"
        return parse_notes(entry.value, scope, where), entry.revision

    async def notes(self, scope: str) -> tuple[Note, ...]:
        try:
            return (await self._read(await self._kv(), scope))[0]
        except DamagedMemoryError as exc:
            logger.warning("%s", exc.message)
            return ()

    async def change(self, scope: str, change: Change) -> tuple[Note, ...]:
        from nats.js.errors import KeyWrongLastSequenceError

        kv = await self._kv()
        for _ in range(MAX_CONFLICTS):
            notes, revision = await self._read(kv, scope)
            changed = change(notes)
            try:
                if revision is None:
                    await kv.create(_key(scope), dump_notes(changed))
                else:
                    await kv.update(_key(scope), dump_notes(changed), last=revision)
            except KeyWrongLastSequenceError:
                continue  # another writer got there first: read again
            return changed
        raise NoteError(
            "MEMORY_BUSY",
            f"the notes of {scope} kept changing under this change",
            fix="try again",
            scope=scope,
        )

    async def scopes(self) -> list[str]:
        buckets = await self._buckets()
        await self._kv()
        found = await scan(buckets.js, buckets.names.memory, f"{_PREFIX}*", meta_only=True)
        return sorted(unhex(key[len(_PREFIX) :]) for key in found)
