"""The NATS task store's files: log lines (journals, the audit log) in a JetStream stream, one
subject per task and file, queued and published in batches by the file store's writer
(``harness/tasks/journal.py``); whole text files (diffs) in an object store."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from pathlib import Path, PurePosixPath

from harness.errors import HarnessError
from harness.tasks.journal import JournalWriter, LogEntries, parse_lines
from harness.tasks.nats_buckets import CHUNK_BYTES, Buckets, nats_failures
from harness.tasks.nats_records import task_key

logger = logging.getLogger(__name__)

Connect = Callable[[], Awaitable[Buckets]]


@contextmanager
def _no_folder(slug: str) -> Iterator[Path]:
    # The writer's file work is never asked for: every batch goes to the stream.
    raise HarnessError(f"task {slug!r} has no folder in the NATS task store", fix="")
    yield Path()  # pragma: no cover


class StreamWriter(JournalWriter):
    """The file store's batched writer, each batch of a file published as one message (or a
    few, for a batch over ``CHUNK_BYTES``) on the file's subject."""

    def __init__(self, connect: Connect) -> None:
        super().__init__(_no_folder)
        self._connect = connect

    async def _write_task(self, slug: str, files: dict[PurePosixPath, list[str]]) -> bool:
        try:
            buckets = await self._connect()
            if not await task_exists(buckets, slug):
                raise HarnessError(f"task {slug!r} does not exist", fix="")
        except nats_failures() as exc:
            raise HarnessError(f"the task store cannot be reached: {exc}", fix="") from exc
        cancelled = False
        for name, texts in files.items():
            subject = buckets.names.log_subject(slug, str(name))
            try:
                for chunk in _chunks(texts):
                    await buckets.js.publish(subject, chunk, stream=buckets.names.logs)
            except asyncio.CancelledError:
                cancelled = True  # the publish under way is answered or lost; the rest go on
            except nats_failures() as exc:
                logger.error("could not publish %d log lines of task %s to %s: %s",
                             len(texts), slug, name, exc)  # fmt: skip
        return cancelled


def _chunks(texts: list[str]) -> Iterator[bytes]:
    """The lines as messages of whole lines, each at most CHUNK_BYTES unless one line is."""
    chunk: list[bytes] = []
    size = 0
    for text in texts:
        data = text.encode("utf-8")
        if chunk and size + len(data) > CHUNK_BYTES:
            yield b"".join(chunk)
            chunk, size = [], 0
        chunk.append(data)
        size += len(data)
    if chunk:
        yield b"".join(chunk)


async def task_exists(buckets: Buckets, slug: str) -> bool:
    from nats.js.errors import NotFoundError

    try:
        entry = await buckets.tasks.get(task_key(slug))
    except NotFoundError:
        return False
    return entry.value is not None


async def read_log(buckets: Buckets, slug: str, name: PurePosixPath) -> LogEntries:
    """The entries of a task's log, in the order they were published; [] for none."""
    return parse_lines(
        (await log_bytes(buckets, slug, str(name))).decode("utf-8", errors="replace"),
        Path(f"nats:{buckets.names.logs}/{slug}/{name}"),
    )


async def log_bytes(buckets: Buckets, slug: str, name: str) -> bytes:
    from nats.js.errors import NotFoundError

    subject = buckets.names.log_subject(slug, name)
    parts: list[bytes] = []
    seq = 1
    while True:
        try:
            msg = await buckets.js.get_msg(buckets.names.logs, seq, subject=subject, next=True)
        except NotFoundError:
            return b"".join(parts)
        parts.append(msg.data or b"")
        seq = (msg.seq or seq) + 1


async def append_log(buckets: Buckets, slug: str, name: str, data: bytes) -> None:
    """Publishes whole lines (``data``) to a task's log at once (a store being copied in)."""
    subject = buckets.names.log_subject(slug, name)
    lines = data.decode("utf-8", errors="replace").splitlines(keepends=True)
    for chunk in _chunks(lines):
        await buckets.js.publish(subject, chunk, stream=buckets.names.logs)


def object_name(slug: str, name: PurePosixPath | str) -> str:
    return f"{slug}/{name}"


async def write_object(buckets: Buckets, slug: str, name: PurePosixPath | str, data: bytes) -> None:
    await buckets.files.put(object_name(slug, name), data)


async def read_object(buckets: Buckets, slug: str, name: PurePosixPath | str) -> bytes | None:
    from nats.js.errors import NotFoundError

    try:
        result = await buckets.files.get(object_name(slug, name))
    except NotFoundError:
        return None
    return result.data or b""


async def file_names(buckets: Buckets, slug: str) -> tuple[list[str], list[str]]:
    """The task's (logs, text files), by name in the task folder."""
    from nats.js.errors import NotFoundError

    info = await buckets.js.stream_info(
        buckets.names.logs, subjects_filter=buckets.names.task_logs(slug)
    )
    logs = sorted(
        bytes.fromhex(subject.rsplit(".", 1)[1]).decode("utf-8")
        for subject in (info.state.subjects or {})
    )
    try:
        objects = await buckets.files.list(ignore_deletes=True)
    except NotFoundError:
        objects = []
    prefix = object_name(slug, "")
    texts = sorted(
        o.name.removeprefix(prefix)
        for o in objects
        if o.name and o.name.startswith(prefix) and not o.deleted
    )
    return logs, texts


async def delete_files(buckets: Buckets, slug: str) -> None:
    """Every log and text file of the task."""
    from nats.js.errors import NotFoundError

    await buckets.js.purge_stream(buckets.names.logs, subject=buckets.names.task_logs(slug))
    _, texts = await file_names(buckets, slug)
    for name in texts:
        with contextlib.suppress(NotFoundError):  # deleted meanwhile by another process
            await buckets.files.delete(object_name(slug, name))
