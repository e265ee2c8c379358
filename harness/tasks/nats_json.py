"""JSON values in a JetStream key-value bucket, as the ledger and the leases keep them: keys
made from any text, ``create`` as a first-one-wins, a compare-and-set change tried again while
others get there first, and a write whose lost race changes nothing for its caller."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, TypeVar

from harness.config.store_schema import StoreSettings
from harness.tasks.nats_buckets import Buckets, Names, open_buckets
from harness.tasks.nats_kv import MAX_CONFLICTS
from harness.tasks.nats_liveness import HEARTBEAT_SECONDS, MISSED_BEATS

if TYPE_CHECKING:
    from nats.js.kv import KeyValue

T = TypeVar("T")
JSON = dict[str, Any]


async def open_bucket(
    settings: StoreSettings, name: Callable[[Names], str]
) -> tuple[Buckets, KeyValue]:
    """A connection to the store's server (its buckets in place) and the key-value bucket
    ``name`` picks (made on first use, one value per key)."""
    from nats.js.api import KeyValueConfig
    from nats.js.errors import BucketNotFoundError

    buckets = await open_buckets(settings, run_ttl=HEARTBEAT_SECONDS * MISSED_BEATS)
    try:
        try:
            return buckets, await buckets.js.key_value(name(buckets.names))
        except BucketNotFoundError:
            config = KeyValueConfig(bucket=name(buckets.names), history=1)
            return buckets, await buckets.js.create_key_value(config)
    except BaseException:
        await buckets.close()
        raise


def hex_key(text: str) -> str:
    # Hex: a name's dots, colons and slashes are not allowed in (or would split) a NATS key.
    return text.encode("utf-8").hex()


def unhex(text: str) -> str:
    return bytes.fromhex(text).decode("utf-8")


def dump(value: JSON) -> bytes:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


async def read(kv: KeyValue, key: str) -> tuple[JSON, int] | None:
    """The key's value and revision; None when it holds none."""
    from nats.js.errors import NotFoundError

    try:
        entry = await kv.get(key)
    except NotFoundError:
        return None
    if not entry.value or entry.revision is None:
        return None
    return json.loads(entry.value), entry.revision


async def create(kv: KeyValue, key: str, value: JSON) -> bool:
    """``create``: False when the key is there already."""
    from nats.js.errors import KeyWrongLastSequenceError

    try:
        await kv.create(key, dump(value))
    except KeyWrongLastSequenceError:
        return False
    return True


async def change(kv: KeyValue, key: str, change: Callable[[JSON], JSON]) -> None:
    """A compare-and-set change of ``key``'s value, tried again while others get there first;
    nothing when the key holds none."""
    from nats.js.errors import KeyWrongLastSequenceError

    for _ in range(MAX_CONFLICTS):
        found = await read(kv, key)
        if found is None:
            return
        try:
            await kv.update(key, dump(change(found[0])), last=found[1])
            return
        except KeyWrongLastSequenceError:
            continue


async def quietly(write: Awaitable[T], otherwise: T) -> T:
    """A write whose losing a race changes nothing for the caller (``otherwise`` then)."""
    from nats.js.errors import KeyWrongLastSequenceError

    try:
        return await write
    except KeyWrongLastSequenceError:
        return otherwise


# The server's code for a write whose expected last revision is not the key's.
WRONG_LAST_SEQUENCE = 10071


async def delete(kv: KeyValue, key: str, last: int) -> bool:
    """Deletes ``key`` if its revision is still ``last``: False when it is not (nats-py
    raises a bare BadRequestError for a delete, not KeyWrongLastSequenceError)."""
    from nats.js.errors import BadRequestError

    try:
        await kv.delete(key, last=last)
    except BadRequestError as exc:
        if exc.err_code != WRONG_LAST_SEQUENCE:
            raise
        return False
    return True
