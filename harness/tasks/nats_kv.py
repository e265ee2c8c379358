"""What the NATS task store does with its key-value bucket beyond single gets and puts:
reading many keys at once (one ordered consumer delivering the last value of each matching
key, rather than a request per key), removing keys without a marker, keeping a summary with
compare-and-set, and the lookup keys that point at a slug."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from harness.tasks import nats_records as keys
from harness.tasks.model import Task

if TYPE_CHECKING:
    from nats.aio.msg import Msg
    from nats.js.client import JetStreamContext
    from nats.js.kv import KeyValue

_REMOVED = ("DEL", "PURGE")
# Conflicting writers take turns; this many lost races in a row is a fault, not contention.
MAX_CONFLICTS = 1000


async def scan(
    js: JetStreamContext, bucket: str, pattern: str, *, meta_only: bool = False
) -> dict[str, tuple[int, bytes]]:
    """key -> (revision, value) of every live key matching ``pattern`` (e.g. ``task.>``),
    as the bucket held them when the scan began; with ``meta_only`` the values are left on
    the server (b""). Like the client's watcher, without its queue between the messages and
    the caller (a third of a listing's time)."""
    from nats.js.api import DeliverPolicy

    prefix = f"$KV.{bucket}."
    found: dict[str, tuple[int, bytes]] = {}
    done = asyncio.get_running_loop().create_future()

    async def take(msg: Msg) -> None:
        meta = msg.metadata
        header = msg.header or {}
        key = msg.subject[len(prefix) :]
        if header.get("KV-Operation") in _REMOVED or "Nats-Marker-Reason" in header:
            found.pop(key, None)
        else:
            found[key] = (meta.sequence.stream, msg.data or b"")
        if meta.num_pending == 0 and not done.done():
            done.set_result(None)

    sub = await js.subscribe(
        f"{prefix}{pattern}",
        stream=f"KV_{bucket}",
        cb=take,
        ordered_consumer=True,
        deliver_policy=DeliverPolicy.LAST_PER_SUBJECT,
        headers_only=meta_only,
    )
    try:
        info = await sub.consumer_info()
        # The server's count, not this side's: messages it sent may still be on their way.
        sent = info.delivered.consumer_seq if info.delivered else 0
        if info.num_pending == 0 and not sent and not done.done():
            done.set_result(None)  # nothing to deliver
        await done
    finally:
        await sub.unsubscribe()
    return found


async def live_keys(js: JetStreamContext, bucket: str, pattern: str) -> set[str]:
    """The keys matching ``pattern`` that hold a value, in one request (the server counts the
    messages of each subject): right only for keys removed with ``remove``, never ``delete``
    or ``purge``, whose markers would count as a value."""
    stream, prefix = f"KV_{bucket}", f"$KV.{bucket}."
    info = await js.stream_info(stream, subjects_filter=f"{prefix}{pattern}")
    return {subject.removeprefix(prefix) for subject in info.state.subjects or {}}


async def remove(js: JetStreamContext, bucket: str, key: str) -> None:
    """Removes the key with no marker left behind (``live_keys`` then no longer counts it;
    ``create`` may take it again)."""
    await js.purge_stream(f"KV_{bucket}", subject=f"$KV.{bucket}.{key}")


async def keep_summary(bucket: KeyValue, task: Task, revision: int) -> None:
    """Keeps the summary of ``task`` at ``revision`` in its index shard, unless one of a later
    revision is there."""

    def change(entries: dict[str, Any]) -> bool:
        if keys.entry_revision(entries.get(task.slug)) >= revision:
            return False
        entries[task.slug] = keys.summary_entry(task, revision)
        return True

    await _change_shard(bucket, task.slug, change)


async def drop_summary(bucket: KeyValue, slug: str) -> None:
    """Drops the task's summary from its index shard (a listing then reads the task)."""
    await _change_shard(bucket, slug, lambda entries: entries.pop(slug, None) is not None)


async def _change_shard(
    bucket: KeyValue, slug: str, change: Callable[[dict[str, Any]], bool]
) -> None:
    """One compare-and-set change of the slug's index shard (``change`` says whether it
    changed anything), tried again while other writers get there first."""
    from nats.js.errors import KeyWrongLastSequenceError, NotFoundError

    key = keys.index_key(slug)
    for _ in range(MAX_CONFLICTS):
        try:
            entry = await bucket.get(key)
        except NotFoundError:
            entry = None
        entries = keys.load_shard(entry.value if entry else None)
        if not change(entries):
            return
        try:
            if entry is None or entry.revision is None:
                await bucket.create(key, keys.dump_shard(entries))
            else:
                await bucket.update(key, keys.dump_shard(entries), last=entry.revision)
            return
        except KeyWrongLastSequenceError:
            continue  # another writer changed the shard: apply the change to theirs


async def unpoint(bucket: KeyValue, key: str, slug: str) -> None:
    """Drops a lookup key if it still points at ``slug``."""
    from nats.js.errors import KeyWrongLastSequenceError, NotFoundError

    try:
        entry = await bucket.get(key)
        if entry.value == slug.encode():
            await bucket.delete(key, last=entry.revision)
    except (NotFoundError, KeyWrongLastSequenceError):
        pass  # gone, or taken by another task meanwhile: not ours to drop


async def pointed(bucket: KeyValue, key: str) -> str | None:
    """The slug a lookup key points at; None when it points at none."""
    from nats.js.errors import NotFoundError

    try:
        entry = await bucket.get(key)
    except NotFoundError:
        return None
    return entry.value.decode() if entry.value else None
