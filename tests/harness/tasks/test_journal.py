"""The batched log writer shared by both task stores."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

import harness.tasks.journal
from harness.errors import TaskNotFoundError
from harness.tasks.folder_io import FolderIO
from harness.tasks.journal import JournalWriter, read_lines


def writer_into(root: Path) -> JournalWriter:
    """A writer whose task folders are ``root/<slug>``; slugs without a folder are missing."""

    @contextmanager
    def open_folder(slug: str) -> Iterator[Path]:
        folder = root / slug
        if not folder.is_dir():
            raise TaskNotFoundError(slug)
        yield folder

    return JournalWriter(open_folder)


@pytest.fixture
def task_folder(tmp_path: Path) -> Path:
    (tmp_path / "t").mkdir()
    return tmp_path / "t"


@pytest.mark.anyio
async def test_a_failed_write_is_logged_with_the_file_and_its_lines_are_not_retried(
    tmp_path: Path, task_folder: Path, caplog: pytest.LogCaptureFixture
) -> None:
    writer = writer_into(tmp_path)
    (task_folder / "bad.jsonl").mkdir()  # appending to a folder fails

    with caplog.at_level(logging.ERROR):
        writer.append("t", "bad.jsonl", {"n": 1})
        writer.append("t", "good.jsonl", {"n": 1})
        await writer.flush()

    assert str(task_folder / "bad.jsonl") in caplog.text
    assert read_lines(task_folder / "good.jsonl") == [{"n": 1}]
    (task_folder / "bad.jsonl").rmdir()
    writer.append("t", "bad.jsonl", {"n": 2})
    await writer.close()
    assert read_lines(task_folder / "bad.jsonl") == [{"n": 2}]


@pytest.mark.anyio
async def test_a_burst_of_lines_is_written_in_one_append_per_file(
    tmp_path: Path, task_folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    writer = writer_into(tmp_path)
    appends: list[tuple[str, int]] = []
    real_append = harness.tasks.journal._append

    async def counting_append(path: Path, text: str, count: int, files: FolderIO) -> None:
        appends.append((path.name, count))
        await real_append(path, text, count, files)

    monkeypatch.setattr(harness.tasks.journal, "_append", counting_append)
    for n in range(1000):
        writer.append("t", "journals/a.jsonl" if n % 2 else "audit.jsonl", {"n": n})
    await writer.close()

    assert appends == [("audit.jsonl", 500), ("a.jsonl", 500)]
    assert read_lines(task_folder / "journals" / "a.jsonl") == [{"n": n} for n in range(1, 1000, 2)]


@pytest.mark.anyio
async def test_no_writer_task_outlives_the_queued_lines(tmp_path: Path, task_folder: Path) -> None:
    writer = writer_into(tmp_path)
    writer.append("t", "audit.jsonl", {"n": 1})

    await writer.close()

    assert [t for t in asyncio.all_tasks() if t.get_name() == "journal-writer"] == []


@pytest.mark.anyio
async def test_a_cancelled_writer_still_writes_the_lines_it_has_queued(
    tmp_path: Path, task_folder: Path
) -> None:
    writer = writer_into(tmp_path)
    for n in range(100):
        writer.append("t", "audit.jsonl", {"n": n})
    task = next(t for t in asyncio.all_tasks() if t.get_name() == "journal-writer")
    await asyncio.sleep(0)  # the writer is taking the task's folder

    task.cancel()  # as a loop shutting down does
    with pytest.raises(asyncio.CancelledError):
        await task

    assert read_lines(task_folder / "audit.jsonl") == [{"n": n} for n in range(100)]


def test_lines_queued_before_any_event_loop_are_written_by_the_first_flush(
    tmp_path: Path, task_folder: Path
) -> None:
    writer = writer_into(tmp_path)

    writer.append("t", "audit.jsonl", {"n": 1})
    asyncio.run(writer.flush())

    assert read_lines(task_folder / "audit.jsonl") == [{"n": 1}]


def test_a_writer_keeps_working_across_event_loops(tmp_path: Path, task_folder: Path) -> None:
    writer = writer_into(tmp_path)

    async def write(n: int) -> None:
        writer.append("t", "audit.jsonl", {"n": n})
        await writer.close()

    asyncio.run(write(1))
    asyncio.run(write(2))

    assert read_lines(task_folder / "audit.jsonl") == [{"n": 1}, {"n": 2}]


def test_a_torn_last_line_is_skipped_with_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    log = tmp_path / "audit.jsonl"
    log.write_text('{"n": 1}\n{"n": 2}\n{"n": 3, "te', encoding="utf-8")

    with caplog.at_level(logging.WARNING):
        assert read_lines(log) == [{"n": 1}, {"n": 2}]

    assert f"{log}:3" in caplog.text
