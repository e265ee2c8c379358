"""What every store must do as ``TaskFiles`` (a task's logs of JSON lines and its text files),
as a pytest suite both stores run.

Subclass it in a test module (its name starting with ``Test``) and give it a ``store`` fixture
yielding a fresh, empty store (and closing it afterwards); pytest runs every test below
against it. Behaviour only one store has (files on disk, the index) is tested next to that
store, not here.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest

from harness.errors import HarnessError, TaskNotFoundError
from harness.tasks.store import Store

ESCAPING_LOG_NAMES = [
    "../x.jsonl",
    "/tmp/x.jsonl",
    "a/b/c.jsonl",
    "journals/../../x",
    ".lock",
    "task.json",
    "journals/task.json",
]


@pytest.mark.anyio
class TaskFilesConformance:
    """The TaskFiles contract: a task's logs of JSON lines and its text files."""

    async def test_logged_lines_read_back_in_order_with_unicode(self, store: Store) -> None:
        slug = (await store.create("Do it")).slug

        store.append_jsonl(slug, "journals/dev-1.jsonl", {"text": "héllo ✓"})
        store.append_jsonl(slug, "journals/dev-1.jsonl", {"n": 2})
        await store.flush()

        assert await store.read_jsonl(slug, "journals/dev-1.jsonl") == [
            {"text": "héllo ✓"},
            {"n": 2},
        ]

    async def test_read_jsonl_sees_lines_still_queued(self, store: Store) -> None:
        slug = (await store.create("Do it")).slug

        for n in range(50):
            store.append_jsonl(slug, "audit.jsonl", {"n": n})

        assert await store.read_jsonl(slug, "audit.jsonl") == [{"n": n} for n in range(50)]

    async def test_each_log_keeps_its_order_when_lines_of_many_files_interleave(
        self, store: Store
    ) -> None:
        slugs = [(await store.create(f"Task {n}")).slug for n in range(3)]
        names = ["audit.jsonl", "journals/a.jsonl", "journals/b.jsonl"]

        for n in range(300):
            store.append_jsonl(slugs[n % 3], names[n % 2], {"n": n})
            if n % 50 == 0:
                await asyncio.sleep(0)  # let the writer take a batch mid-way

        for index, slug in enumerate(slugs):
            for parity, name in enumerate(names[:2]):
                expected = [{"n": n} for n in range(300) if n % 3 == index and n % 2 == parity]
                assert await store.read_jsonl(slug, name) == expected

    async def test_a_log_never_written_reads_as_empty(self, store: Store) -> None:
        slug = (await store.create("Do it")).slug

        assert await store.read_jsonl(slug, "journals/nobody.jsonl") == []

    async def test_entries_are_captured_when_queued(self, store: Store) -> None:
        slug = (await store.create("Do it")).slug
        entry: dict[str, Any] = {"step": 1}

        store.append_jsonl(slug, "audit.jsonl", entry)
        entry["step"] = 2  # the caller reuses its dict before the writer runs

        assert await store.read_jsonl(slug, "audit.jsonl") == [{"step": 1}]

    @pytest.mark.parametrize("name", ESCAPING_LOG_NAMES)
    async def test_append_jsonl_rejects_names_outside_the_task_folder_at_once(
        self, store: Store, name: str
    ) -> None:
        slug = (await store.create("Do it")).slug

        with pytest.raises(HarnessError):
            store.append_jsonl(slug, name, {"x": 1})
        with pytest.raises(HarnessError):
            await store.read_jsonl(slug, name)

    async def test_a_written_text_file_reads_back_and_a_rewrite_replaces_it(
        self, store: Store
    ) -> None:
        slug = (await store.create("Do it")).slug

        assert await store.read_text(slug, "diffs/a1.diff") is None
        await store.write_text(slug, "diffs/a1.diff", "+ héllo\n")
        await store.write_text(slug, "diffs/a1.diff", "+ héllo ✓\n")

        assert await store.read_text(slug, "diffs/a1.diff") == "+ héllo ✓\n"
        assert (await store.get(slug)).slug == slug  # task.json is untouched

    @pytest.mark.parametrize("name", [*ESCAPING_LOG_NAMES, "task.json"])
    async def test_text_files_stay_inside_the_task_folder(self, store: Store, name: str) -> None:
        slug = (await store.create("Do it")).slug

        with pytest.raises(HarnessError):
            await store.write_text(slug, name, "x")
        with pytest.raises(HarnessError):
            await store.read_text(slug, name)

    async def test_a_text_file_for_a_missing_task_raises_task_not_found(self, store: Store) -> None:
        with pytest.raises(TaskNotFoundError):
            await store.write_text("ghost", "diffs/a1.diff", "x")

    async def test_lines_for_a_missing_task_are_dropped_with_an_error(
        self, store: Store, caplog: pytest.LogCaptureFixture
    ) -> None:
        with caplog.at_level(logging.ERROR):
            store.append_jsonl("ghost", "audit.jsonl", {"x": 1})
            await store.flush()

        assert "ghost" in caplog.text
        assert await store.list() == []
        with pytest.raises(TaskNotFoundError):
            await store.read_jsonl("ghost", "audit.jsonl")

    async def test_close_writes_queued_lines_and_can_be_called_twice(self, store: Store) -> None:
        slug = (await store.create("Do it")).slug
        store.append_jsonl(slug, "audit.jsonl", {"last": True})

        await store.close()
        await store.close()

        assert await store.read_jsonl(slug, "audit.jsonl") == [{"last": True}]

    async def test_lines_queued_from_another_thread_are_written(self, store: Store) -> None:
        slug = (await store.create("Do it")).slug
        store.append_jsonl(slug, "audit.jsonl", {"from": "loop"})

        await asyncio.to_thread(store.append_jsonl, slug, "audit.jsonl", {"from": "thread"})

        assert await store.read_jsonl(slug, "audit.jsonl") == [
            {"from": "loop"},
            {"from": "thread"},
        ]
