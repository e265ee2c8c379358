"""Final records the store could not take yet, kept until it does.

When a dispatch ends and its task folder cannot be written (a full disk, a folder made
read-only or immutable meanwhile), its final record (status, result, cost, error, where the
work is) must not be lost: it is *spooled* to ``<tasks dir>/.pending/<agent id>.json``
(outside the task's own folder, a ``harness/spool.py`` spool) and tried again with
backoff until the store takes it, and then the spool file goes. A process that dies meanwhile
leaves the spool file behind: the next start applies it before recovery marks anything
interrupted, so an agent that finished is never announced as interrupted.

Until then, what the harness says of the dispatch comes from the pending record (``overlay``):
the facade's reads of a task, a record or the listing, in this process and in any other
reading the same tasks folder (``harness tasks``).

A record's diff the task folder refused is kept with it (``<agent id>.diff`` beside its spool
file, and in memory) and written into the folder first, so a stored record never names a
diff file that is not there (``diff`` serves it meanwhile).

File work runs in worker threads; nothing here blocks the event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from harness.errors import HarnessError, TaskNotFoundError
from harness.retry import Backoff, retrying
from harness.spool import Spool
from harness.tasks.common import upsert
from harness.tasks.model import DispatchRecord, Task, TaskSummary
from harness.tasks.store import Store
from harness.waits import stop_tasks

logger = logging.getLogger(__name__)

_DIFF_SUFFIX = ".diff"
_SAFE_ID = re.compile(r"^[A-Za-z0-9_-]{1,128}$")
RETRY = Backoff(0.2, 30.0)  # after a failed store: soon, then at most every half minute

Stored = Callable[[Task, DispatchRecord], None]


class _StillPendingError(Exception):
    """The store refused a final record this time (``_try_store`` logged why): tried again."""


class PendingFinals:
    """The final records waiting for the store, in memory and spooled under ``folder``."""

    def __init__(
        self,
        folder: Path,
        store: Store,
        *,
        on_stored: Stored = lambda _task, _record: None,
        backoff: Backoff = RETRY,
    ) -> None:
        self.folder = folder
        self._spool = Spool(folder)
        self._store = store
        self._on_stored = on_stored
        self._backoff = backoff
        # agent id -> (task slug, record): every record not yet in the store.
        self._pending: dict[str, tuple[str, DispatchRecord]] = {}
        # agent id -> its diff, not yet written into the task folder (as its record names).
        self._diffs: dict[str, str] = {}
        self._retries: dict[str, asyncio.Task[None]] = {}
        self._files = asyncio.Lock()  # orders writing and removing spool files

    # ------------------------------------------------------------ keeping and retrying

    async def keep(self, slug: str, record: DispatchRecord, *, diff: str | None = None) -> None:
        """Spool the record and try it again until the store takes it. A spool that cannot be
        written either keeps it in memory (still retried, lost only if this process dies).
        ``diff``: the record's diff the task folder refused (``record.diff_file`` names
        it), written there before the record."""
        async with self._files:
            self._pending[record.agent_id] = (slug, record)
            if diff is not None:
                self._diffs[record.agent_id] = diff
            try:
                await self._put(slug, record, diff)
            except (OSError, ValueError) as exc:
                logger.error(
                    "final record of agent %s kept in memory only: cannot spool it in %s: %s",
                    record.agent_id,
                    self.folder,
                    exc,
                )
        self._retry(slug, record)

    async def amend(
        self, agent_id: str, change: Callable[[DispatchRecord], DispatchRecord]
    ) -> DispatchRecord | None:
        """Change the agent's final record while it is still pending here (a note added
        after its end, say): the change is kept and stored with it, never overwritten by it.
        The changed record; None when none is pending here (the store has it)."""
        kept = self._pending.get(agent_id)
        if kept is None:
            return None
        slug, record = kept
        changed = change(record)
        await self.keep(slug, changed)
        return changed

    async def apply_spooled(self) -> set[str]:
        """At start: store each spooled record a stopped process left; those the store still
        refuses are retried from now on. The agent ids still pending."""
        for slug, record in await self._read_spool():
            if record.agent_id in self._pending:
                continue
            self._pending[record.agent_id] = (slug, record)
            diff = await self._read_diff(record.agent_id)
            if diff is not None:
                self._diffs[record.agent_id] = diff
            if not await self._try_store(slug, record):
                self._retry(slug, record)
        return set(self._pending)

    def pending_ids(self) -> set[str]:
        return set(self._pending)

    async def close(self) -> None:
        """Stop retrying; what is still pending stays spooled for the next start."""
        await stop_tasks(list(self._retries.values()))

    def _retry(self, slug: str, record: DispatchRecord) -> None:
        old = self._retries.pop(record.agent_id, None)
        if old is not None:
            old.cancel()
        retry = asyncio.create_task(
            self._until_stored(slug, record), name=f"store final record of {record.agent_id}"
        )
        self._retries[record.agent_id] = retry
        retry.add_done_callback(lambda done: self._retry_ended(record.agent_id, done))

    def _retry_ended(self, agent_id: str, done: asyncio.Task[None]) -> None:
        if self._retries.get(agent_id) is done:
            del self._retries[agent_id]

    async def _until_stored(self, slug: str, record: DispatchRecord) -> None:
        """Tries the record again, after the store refused it once, until it is settled."""

        async def store() -> None:
            if self._pending.get(record.agent_id, (slug, None))[1] is not record:
                return  # replaced by a newer record, or stored meanwhile
            if not await self._try_store(slug, record):
                raise _StillPendingError(record.agent_id)

        await retrying(store, retry_on=_StillPendingError, backoff=self._backoff, already_failed=1)

    async def _try_store(self, slug: str, record: DispatchRecord) -> bool:
        """Whether the record is settled: stored (its spool file gone), or its task is gone."""
        try:
            diff = self._diffs.get(record.agent_id)
            if diff is not None and record.diff_file is not None:
                await self._store.write_text(slug, record.diff_file, diff)
            task = await self._store.save_dispatch(slug, record)
        except TaskNotFoundError:
            logger.warning(
                "final record of agent %s dropped: its task %s no longer exists",
                record.agent_id,
                slug,
            )
            await self._settled(record)
            return True
        except (HarnessError, OSError) as exc:
            logger.warning(
                "final record of agent %s still not stored in task %s (tried again later): %s",
                record.agent_id,
                slug,
                exc,
            )
            return False
        await self._settled(record)
        logger.info("final record of agent %s stored in task %s at last", record.agent_id, slug)
        self._on_stored(task, record)
        return True

    async def _settled(self, record: DispatchRecord) -> None:
        async with self._files:  # an amended record's spool file is never removed
            if self._pending.get(record.agent_id, ("", None))[1] is not record:
                return  # amended meanwhile: the newer record is still to be stored
            if _SAFE_ID.match(record.agent_id):  # not removable: applied again, harmless
                await self._spool.drop(record.agent_id, beside=(_DIFF_SUFFIX,))
            del self._pending[record.agent_id]
            self._diffs.pop(record.agent_id, None)

    # ------------------------------------------------------------ what the harness says

    async def overlay(self, task: Task) -> Task:
        """``task`` with the final records still pending for it in place of its stored ones."""
        found = await self.pending_of(task.slug)
        for record in found:
            task = upsert(task, record)
        return task

    async def summaries(self, stored: list[TaskSummary]) -> list[TaskSummary]:
        """The ``stored`` summaries, each task with a final record pending read as the store
        will say once it is in (one that cannot be read now: as stored)."""
        waiting = await self.slugs()
        if not waiting:
            return stored
        shown = []
        for summary in stored:
            if summary.slug in waiting:
                with contextlib.suppress(HarnessError):
                    summary = TaskSummary.of(
                        await self.overlay(await self._store.get(summary.slug))
                    )
            shown.append(summary)
        return shown

    async def record(self, agent_id: str) -> DispatchRecord | None:
        """The pending final record of the agent, if one is pending (here or spooled)."""
        kept = self._pending.get(agent_id)
        if kept is not None:
            return kept[1]
        if not _SAFE_ID.match(agent_id):
            return None
        spooled = _decoded(agent_id, await self._spool.get(agent_id))
        return spooled[1] if spooled is not None else None

    async def diff(self, agent_id: str) -> str | None:
        """The diff of a pending record not yet written into its task folder (here or
        spooled), if there is one."""
        kept = self._diffs.get(agent_id)
        if kept is not None or not _SAFE_ID.match(agent_id):
            return kept
        return await self._read_diff(agent_id)

    async def pending_of(self, slug: str | None = None) -> list[DispatchRecord]:
        """The pending final records (of task ``slug``): this process's and those spooled by
        any process on the same tasks folder."""
        found = dict(self._pending)
        for spooled in await self._read_spool():
            found.setdefault(spooled[1].agent_id, spooled)
        return [record for s, record in found.values() if slug is None or s == slug]

    async def slugs(self) -> set[str]:
        """The tasks with a pending final record."""
        found = {slug for slug, _ in self._pending.values()}
        return found | {slug for slug, _ in await self._read_spool()}

    # ------------------------------------------------------------ the spool

    async def _put(self, slug: str, record: DispatchRecord, diff: str | None) -> None:
        if not _SAFE_ID.match(record.agent_id):
            raise ValueError(f"not an agent id to name a file by: {record.agent_id!r}")
        if diff is not None:  # before the record that names it
            await self._spool.put_beside(record.agent_id, _DIFF_SUFFIX, diff.encode("utf-8"))
        from harness import serialise  # pydantic: only once there is a record to spool

        data = {"taskSlug": slug, "record": serialise.to_json(record)}
        await self._spool.put(record.agent_id, data)

    async def _read_diff(self, agent_id: str) -> str | None:
        data = await self._spool.get_beside(agent_id, _DIFF_SUFFIX)
        return data.decode("utf-8", "replace") if data is not None else None

    async def _read_spool(self) -> list[tuple[str, DispatchRecord]]:
        """The records spooled (by any process): one that cannot be read is left as it is
        (for a person to look at), as is every file when this is another process's read."""
        found = []
        for name, data in sorted(await self._spool.entries(set_aside=False)):
            spooled = _decoded(name, data)
            if spooled is not None:
                found.append(spooled)
        return found


def _decoded(name: str, data: dict[str, Any] | None) -> tuple[str, DispatchRecord] | None:
    """(task slug, record) of a spooled record; None when there is none (or it is not one)."""
    if data is None:
        return None
    # pydantic only when the spool holds a record: a listing reads an empty one
    from harness import serialise

    try:
        slug = data["taskSlug"]
        record = serialise.from_json(DispatchRecord, data["record"])
    except (ValueError, KeyError, TypeError, serialise.DecodeError) as exc:
        logger.warning("unreadable spooled final record %s (left as it is): %s", name, exc)
        return None
    return (slug, record) if isinstance(slug, str) else None
