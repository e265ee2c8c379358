"""The NATS task store: tasks in a JetStream key-value bucket, their logs in a stream and
their text files in an object store, on the server config.yaml's ``store:`` names (where the
buckets are: ``harness/tasks/nats_buckets.py``), so every machine with the config sees the same
tasks and several harness processes can share them.

Every change of a task is a read-modify-write that replaces the value only if it is still the
revision read (``update(last=revision)``), tried again on a conflict: concurrent writers in any
process never lose one another's change. A slug is taken by ``create``, which fails when the
key exists. Beside each task its summary (``nats_records.py``), and lookups by thread and by
agent id, each pointing at a slug and checked against the task when read. Runs:
``nats_liveness.py``; logs and text files: ``nats_files.py``. The connection is made on first
use, so the store is built without a running loop, like the file store.
"""

from __future__ import annotations

import asyncio
import builtins
import dataclasses
import logging
from pathlib import Path
from typing import Any

from harness.clock import file_stamp
from harness.errors import AgentNotFoundError, HarnessError, TaskDamagedError, TaskNotFoundError
from harness.tasks import nats_files as files
from harness.tasks import nats_records as keys
from harness.tasks.common import (
    DamagedTask,
    RepairReport,
    check_file_name,
    created_key,
    creation_time,
    make_slug,
    newest_first,
    upsert,
    validate_slug,
    with_rule,
)
from harness.tasks.journal import LogEntries
from harness.tasks.model import (
    FINAL_STATUSES,
    Decision,
    DispatchRecord,
    PullRequest,
    Task,
    TaskSummary,
    ThreadRef,
    Trigger,
)
from harness.tasks.nats_kv import (
    drop_summary,
    live_keys,
    remove,
    scan,
)
from harness.tasks.nats_tasks import NatsTaskRecords, reached
from harness.tasks.repair import salvage
from harness.tasks.spending import Spend, spend_of
from harness.tasks.task_json import dump_task

logger = logging.getLogger(__name__)


class NatsTaskStore(NatsTaskRecords):
    """Tasks on a NATS server with JetStream (``store: {kind: nats}``)."""

    # ------------------------------------------------------------ the TaskStore protocol

    @reached
    async def create(
        self,
        description: str,
        thread: ThreadRef | None = None,
        repository: str | None = None,
        requester: str | None = None,
        trigger: Trigger | None = None,
    ) -> Task:
        from nats.js.errors import KeyWrongLastSequenceError

        buckets = await self.buckets()
        taken: set[str] = set()
        while True:
            slug = make_slug(description, taken)
            task = Task(
                slug,
                creation_time(self._clock.now()),
                description,
                thread=thread,
                repository=repository,
                requester=requester,
                trigger=trigger,
            )
            try:
                revision = await buckets.tasks.create(keys.task_key(slug), dump_task(task))
            except KeyWrongLastSequenceError:
                taken.add(slug)  # first one wins: the next free name
                continue
            await self._keep_summary(task, revision)
            if thread is not None:
                await self._point(keys.thread_key(thread), slug)
            return task

    @reached
    async def get(self, slug: str) -> Task:
        return (await self._read(slug))[0]

    @reached
    async def find_by_thread(self, thread: ThreadRef) -> Task | None:
        slug = await self._pointed(keys.thread_key(thread))
        if slug is None:
            return None
        try:
            task = await self.get(slug)
        except TaskNotFoundError:
            return None
        return task if task.thread == thread else None

    @reached
    async def bind_thread(self, slug: str, thread: ThreadRef) -> Task:
        before, after = await self._update(slug, lambda t: dataclasses.replace(t, thread=thread))
        await self._point(keys.thread_key(thread), slug)
        if before.thread is not None and before.thread != thread:
            await self._unpoint(keys.thread_key(before.thread), slug)
        return after

    @reached
    async def set_requester(self, slug: str, requester: str) -> Task:
        change = lambda t: dataclasses.replace(t, requester=requester)  # noqa: E731
        return (await self._update(slug, change))[1]

    @reached
    async def list(self) -> builtins.list[Task]:
        buckets = await self.buckets()
        found = await scan(buckets.js, buckets.names.tasks, f"{keys.TASK}>")
        tasks = []
        for key, (_, value) in found.items():
            try:
                tasks.append(self._parse(key.removeprefix(keys.TASK), value))
            except TaskDamagedError:
                continue  # listed by ``damaged``
        return newest_first(tasks)

    @reached
    async def listing(self) -> tuple[builtins.list[TaskSummary], builtins.list[DamagedTask]]:
        """``summaries`` and ``damaged`` from one look at the bucket."""
        lines, damaged = await self._lines()
        return [kept.summary for kept in lines], damaged

    async def _lines(self) -> tuple[builtins.list[keys.Kept], builtins.list[DamagedTask]]:
        """Each task's kept summary, and the tasks that do not read. One request for the
        tasks there are and one scan of the summaries; a task is read in full only when it
        has no summary (its writer died between the two writes, or it was written by
        hand)."""
        buckets = await self.buckets()
        slugs, summaries = await asyncio.gather(
            live_keys(buckets.js, buckets.names.tasks, f"{keys.TASK}>"),
            scan(buckets.js, buckets.names.tasks, f"{keys.INDEX}>"),
        )
        # Thousands of summaries: parsed off the loop, as the file store reads its index.
        shards = [value for _, value in summaries.values()]
        lines, unsummed = await asyncio.to_thread(keys.load_summaries, slugs, shards)
        damaged: builtins.list[DamagedTask] = []
        for slug in unsummed:
            try:
                task, revision = await self._read(slug)
            except TaskNotFoundError:
                continue  # deleted meanwhile
            except TaskDamagedError as exc:
                damaged.append(await self._damaged(slug, exc))
                continue
            await self._keep_summary(task, revision)
            kept = keys.Kept(
                revision, TaskSummary.of(task), keys.unfinished_of(task), spend_of(task)
            )
            lines.append(kept)
        lines.sort(key=lambda k: (created_key(k.summary.created), k.summary.slug), reverse=True)
        return lines, sorted(damaged, key=lambda d: d.slug)

    async def _damaged(self, slug: str, exc: TaskDamagedError) -> DamagedTask:
        thread = None
        data = await self.raw(slug)
        if data is not None:
            try:
                thread = salvage(data, slug=slug, file=Path(exc.file), file_time=0.0).task.thread
            except HarnessError:
                thread = None
        return DamagedTask(slug, exc.file, exc.problem, thread)

    async def summaries(self) -> builtins.list[TaskSummary]:
        return (await self.listing())[0]

    async def damaged(self) -> builtins.list[DamagedTask]:
        return (await self.listing())[1]

    @reached
    async def spending(self, since: str) -> builtins.list[Spend]:
        lines, _ = await self._lines()
        return [row for kept in lines for row in kept.spend if row.day >= since]

    @reached
    async def repair(self, slug: str) -> RepairReport:
        from nats.js.errors import KeyWrongLastSequenceError, NotFoundError

        validate_slug(slug)
        buckets = await self.buckets()
        try:
            entry = await buckets.tasks.get(keys.task_key(slug))
        except NotFoundError:
            raise TaskNotFoundError(slug) from None
        data = entry.value or b""
        try:
            self._parse(slug, data)
            return RepairReport(slug)
        except TaskDamagedError as exc:
            now = self._clock.now()
            aside = f"task.json.damaged-{file_stamp(now)}"
            await files.write_object(buckets, slug, aside, data)
            saved = salvage(data, slug=slug, file=Path(exc.file), file_time=now.timestamp())
        try:
            revision = await buckets.tasks.update(
                keys.task_key(slug), dump_task(saved.task), last=entry.revision
            )
        except KeyWrongLastSequenceError:
            raise HarnessError(
                f"task {slug!r} changed while it was repaired", fix="run the repair again"
            ) from None
        await self._keep_summary(saved.task, revision)
        if saved.task.thread is not None:
            await self._point(keys.thread_key(saved.task.thread), slug)
        for record in saved.task.dispatches:
            await self._point(keys.agent_key(record.agent_id), slug)
        moved = f"nats:{buckets.names.files}/{files.object_name(slug, aside)}"
        return RepairReport(slug, moved, saved.kept, saved.dropped)

    @reached
    async def delete(self, slug: str) -> None:
        validate_slug(slug)
        await self.flush()  # lines still queued go first, never to a later task of the slug
        buckets = await self.buckets()
        raw = await self.raw(slug)
        if raw is None:
            raise TaskNotFoundError(slug)
        try:
            task: Task | None = self._parse(slug, raw)
        except TaskDamagedError:
            task = None
        # The files first and the task last: a delete cut short leaves a task to delete again.
        await files.delete_files(buckets, slug)
        if task is not None:
            if task.thread is not None:
                await self._unpoint(keys.thread_key(task.thread), slug)
            for record in task.dispatches:
                await self._unpoint(keys.agent_key(record.agent_id), slug)
        await remove(buckets.js, buckets.names.tasks, keys.task_key(slug))
        # After the task: a listing meanwhile would put back the summary of a task it finds.
        # (One left by a delete cut short is never listed: listings go by the tasks there.)
        await drop_summary(buckets.tasks, slug)

    @reached
    async def record(self, agent_id: str) -> DispatchRecord:
        slug = await self._pointed(keys.agent_key(agent_id))
        if slug is not None:
            try:
                task = await self.get(slug)
            except TaskNotFoundError:
                task = None
            for record in task.dispatches if task else ():
                if record.agent_id == agent_id:
                    return record
        raise AgentNotFoundError(agent_id)

    @reached
    async def knows_agent(self, agent_id: str) -> bool:
        return await self._pointed(keys.agent_key(agent_id)) is not None

    @reached
    async def unfinished(self) -> builtins.list[tuple[str, DispatchRecord]]:
        lines, _ = await self._lines()
        found: builtins.list[tuple[str, DispatchRecord]] = []
        for line in lines:
            if not line.unfinished:
                continue
            try:
                task, revision = await self._read(line.summary.slug)
            except (TaskNotFoundError, TaskDamagedError):
                continue
            if revision != line.revision:  # a writer died between the task and its summary
                await self._keep_summary(task, revision)
            found += [(task.slug, d) for d in task.dispatches if d.status not in FINAL_STATUSES]
        return found

    @reached
    async def save_dispatch(self, slug: str, record: DispatchRecord) -> Task:
        _, after = await self._update(slug, lambda task: upsert(task, record))
        await self._point(keys.agent_key(record.agent_id), slug)
        return after

    @reached
    async def add_decision(self, slug: str, decision: Decision) -> Task:
        change = lambda t: dataclasses.replace(t, decisions=(*t.decisions, decision))  # noqa: E731
        return (await self._update(slug, change))[1]

    @reached
    async def allow(self, slug: str, rule: str) -> Task:
        return (await self._update(slug, lambda task: with_rule(task, rule)))[1]

    @reached
    async def raise_limits(self, slug: str, by: str) -> Task:
        change = lambda t: dataclasses.replace(t, limits_raised_by=by)  # noqa: E731
        return (await self._update(slug, change))[1]

    @reached
    async def set_pull_request(self, slug: str, pull_request: PullRequest | None) -> Task:
        change = lambda t: dataclasses.replace(t, pull_request=pull_request)  # noqa: E731
        return (await self._update(slug, change))[1]

    # ------------------------------------------------------------ the TaskFiles protocol

    def append_jsonl(self, slug: str, name: str, entry: dict[str, Any]) -> None:
        self._journal.append(slug, name, entry)

    @reached
    async def read_jsonl(self, slug: str, name: str) -> LogEntries:
        relative = check_file_name(name)
        await self.get(slug)
        await self.flush()
        return await files.read_log(await self.buckets(), slug, relative)

    @reached
    async def write_text(self, slug: str, name: str, text: str) -> None:
        relative = check_file_name(name)
        await self.get(slug)
        await files.write_object(await self.buckets(), slug, relative, text.encode("utf-8"))

    @reached
    async def read_text(self, slug: str, name: str) -> str | None:
        relative = check_file_name(name)
        await self.get(slug)
        data = await files.read_object(await self.buckets(), slug, relative)
        return None if data is None else data.decode("utf-8", errors="replace")

    async def flush(self) -> None:
        await self._journal.flush()

    # ------------------------------------------------------------ the RunLiveness protocol

    @reached
    async def begin_run(self) -> str:
        return await self._runs.begin_run()

    @reached
    async def run_alive(self, run_id: str) -> bool:
        return await self._runs.run_alive(run_id)

    @reached
    async def ended_runs(self) -> builtins.list[str]:
        return await self._runs.ended_runs()

    @reached
    async def forget_run(self, run_id: str) -> None:
        await self._runs.forget_run(run_id)

    @reached
    async def take_up(self, run_id: str, agent_id: str) -> bool:
        return await self._runs.take_up(run_id, agent_id)

    async def close(self) -> None:
        await self._journal.close()
        opening, self._opening = self._opening, None
        buckets = None
        if opening is not None and opening.done() and opening.exception() is None:
            buckets = opening.result()
        await self._runs.end(buckets)
        if buckets is not None:
            await buckets.close()
