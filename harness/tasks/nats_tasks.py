"""The NATS task store's records: the connection (made on first use, so a store is built
without a running loop, like the file store), and reading and changing one task's record by
compare-and-set, with its summary and lookup keys (``nats_records.py``)."""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Callable, Coroutine
from typing import Any, Concatenate, ParamSpec, TypeVar

from harness.clock import SYSTEM, Clock
from harness.config.store_schema import StoreSettings
from harness.errors import HarnessError, TaskDamagedError, TaskNotFoundError
from harness.tasks import nats_files as files
from harness.tasks import nats_records as keys
from harness.tasks.common import validate_slug
from harness.tasks.model import Task
from harness.tasks.nats_buckets import Buckets, Names, nats_failures, open_buckets, unreachable
from harness.tasks.nats_kv import MAX_CONFLICTS, drop_summary, keep_summary, pointed, unpoint
from harness.tasks.nats_liveness import HEARTBEAT_SECONDS, MISSED_BEATS, NatsRuns
from harness.tasks.task_json import dump_task

logger = logging.getLogger(__name__)

P = ParamSpec("P")
T = TypeVar("T")
S = TypeVar("S", bound="NatsTaskRecords")


def reached(
    method: Callable[Concatenate[S, P], Coroutine[Any, Any, T]],
) -> Callable[Concatenate[S, P], Coroutine[Any, Any, T]]:
    """A store method whose NATS failures (the server gone, a refusal) raise the store's
    HarnessError naming the server and the fix, as the file store's raise OSError: callers
    handle them alike (e.g. the spool of final records keeps the record and tries again)."""

    @functools.wraps(method)
    async def calling(self: S, /, *args: P.args, **kwargs: P.kwargs) -> T:
        try:
            return await method(self, *args, **kwargs)
        except HarnessError:
            raise
        except nats_failures() as exc:
            raise unreachable(self.settings, exc) from exc

    return calling


class NatsTaskRecords:
    """The connection and the reading and writing of one task's record: what the store's
    protocols are built on (``NatsTaskStore``)."""

    def __init__(
        self,
        settings: StoreSettings,
        *,
        clock: Clock = SYSTEM,
        heartbeat_seconds: float = HEARTBEAT_SECONDS,
    ) -> None:
        self.settings = settings
        self._clock = clock
        self._opening: asyncio.Future[Buckets] | None = None
        self._journal = files.StreamWriter(self.buckets)
        self._runs = NatsRuns(self.buckets, clock, heartbeat_seconds)

    @property
    def where(self) -> str:
        return f"NATS at {self.settings.url}"

    async def buckets(self) -> Buckets:
        """The connection with its buckets, made on first use (again after ``close``, or
        after a failed try); one per event loop."""
        loop = asyncio.get_running_loop()
        opening = self._opening
        stale = opening is not None and opening.get_loop() is not loop
        failed = opening is not None and opening.done() and opening.exception() is not None
        if opening is None or stale or failed:
            ttl = self._runs.heartbeat * MISSED_BEATS
            opening = self._opening = asyncio.ensure_future(
                open_buckets(self.settings, run_ttl=ttl)
            )
        return await asyncio.shield(opening)

    # ------------------------------------------------------------ reading one task

    async def _read(self, slug: str) -> tuple[Task, int]:
        """The task and its revision; TaskNotFoundError, TaskDamagedError."""
        from nats.js.errors import NotFoundError

        buckets = await self.buckets()
        try:
            entry = await buckets.tasks.get(keys.task_key(validate_slug(slug)))
        except NotFoundError:
            raise TaskNotFoundError(slug) from None
        if entry.value is None or entry.revision is None:
            raise TaskNotFoundError(slug)
        try:
            return self._parse(slug, entry.value), entry.revision
        except TaskDamagedError:
            # Written over by hand: listings go by summaries, so drop its summary and they
            # list it as damaged from now on.
            await drop_summary(buckets.tasks, slug)
            raise

    def _parse(self, slug: str, data: bytes) -> Task:
        try:
            return keys.read_task(data, bucket=self._names().tasks, slug=slug)
        except HarnessError as exc:
            place = keys.where(self._names().tasks, slug)
            problem = exc.message.removeprefix(f"{place}: ")
            raise TaskDamagedError(slug, place, problem) from exc

    def _names(self) -> Names:
        return Names(self.settings.prefix)

    # ------------------------------------------------------------ writing one task

    async def _update(self, slug: str, change: Callable[[Task], Task]) -> tuple[Task, Task]:
        """(before, after) of one compare-and-set change of the task, retried on conflict."""
        from nats.js.errors import KeyWrongLastSequenceError

        validate_slug(slug)
        buckets = await self.buckets()
        for _ in range(MAX_CONFLICTS):
            before, revision = await self._read(slug)
            after = change(before)
            try:
                new = await buckets.tasks.update(
                    keys.task_key(slug), dump_task(after), last=revision
                )
            except KeyWrongLastSequenceError:
                continue  # another writer got there first: read its version and redo
            await self._keep_summary(after, new)
            return before, after
        raise HarnessError(
            f"task {slug!r}: {MAX_CONFLICTS} writers in a row changed it first",
            fix="try again; if it goes on, look for a process rewriting the task in a loop",
        )

    async def _keep_summary(self, task: Task, revision: int) -> None:
        await keep_summary((await self.buckets()).tasks, task, revision)

    async def _point(self, key: str, slug: str) -> None:
        await (await self.buckets()).tasks.put(key, slug.encode())

    async def _unpoint(self, key: str, slug: str) -> None:
        await unpoint((await self.buckets()).tasks, key, slug)

    async def _pointed(self, key: str) -> str | None:
        return await pointed((await self.buckets()).tasks, key)

    async def put_record(self, slug: str, data: bytes) -> None:
        """Stores ``data`` as the task's record, as it is (a store being copied in: a damaged
        record stays damaged), with its summary and lookups when it reads."""
        buckets = await self.buckets()
        key = keys.task_key(validate_slug(slug))
        entry = await self._entry(key)
        if entry is None:
            revision = await buckets.tasks.create(key, data)
        else:
            revision = await buckets.tasks.update(key, data, last=entry[0])
        await drop_summary(buckets.tasks, slug)
        try:
            task = self._parse(slug, data)
        except TaskDamagedError:
            return
        await self._keep_summary(task, revision)
        if task.thread is not None:
            await self._point(keys.thread_key(task.thread), slug)
        for record in task.dispatches:
            await self._point(keys.agent_key(record.agent_id), slug)

    async def raw(self, slug: str) -> bytes | None:
        """The task's record as stored; None when there is none."""
        entry = await self._entry(keys.task_key(validate_slug(slug)))
        return None if entry is None else entry[1]

    async def _entry(self, key: str) -> tuple[int, bytes] | None:
        from nats.js.errors import NotFoundError

        buckets = await self.buckets()
        try:
            entry = await buckets.tasks.get(key)
        except NotFoundError:
            return None
        return (entry.revision or 0, entry.value or b"")
